"""An application definition: the site's acceptance application as one TOML file (or one [[apps]] table of a
Slurm campaign spec), what `run -- CMD` takes on its command line.

    name = "lammps-melt"                                   # app:NAME (default: the command's program)
    argv = ["lmp", "-in", "/usr/share/lammps/examples/melt/in.melt"]
    trials = 20                                            # per node
    timeout = 600                                          # seconds per trial
    metrics = ["timesteps_per_s:timesteps/s:higher=Performance: .*, ([0-9.]+) timesteps/s"]
    metric_file = "log.lammps"                             # optional: read the figures from this file
    sanity = "Total wall time"
    iteration_regex = '^\\s+\\d+\\s+\\S+\\s+(\\S+)'          # optional
    reference = "785:-5,+10"                               # VALUE:-TOL,+TOL percent
    format = "hpcc"                                        # optional: a built-in program reader
    env = { OMP_NUM_THREADS = "1" }                        # set for every trial
    prepare = "cp /data/in.* ."                            # shell, in the trial's directory
    cleanup = "rm -f dump.*"
    warmup = 1

`check --app FILE` adds it to the default suite; a campaign spec's `[[apps]]` entry is either `file = "..."`
(relative to the spec, `trials` may override) or the same keys inline. Errors name the file, the key's line
and what was expected (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tailscope import tomlfile
from tailscope.app.errors import AppInputError
from tailscope.app.figures import FigureSpec
from tailscope.app.variant import PREFIX, AppVariant, app_params, default_name
from tailscope.errors import InputError
from tailscope.options import SHARED
from tailscope.tomlfile import Table

KEYS = {
    "name", "argv", "trials", "timeout", "metrics", "metric_file", "sanity", "iteration_regex", "reference",
    "format", "env", "prepare", "cleanup", "warmup",
}  # fmt: skip
FIGURE_STRINGS = ("metric_file", "sanity", "iteration_regex", "reference", "format")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_APP_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*\Z")


def load_definition(path: Path) -> tuple[AppVariant, int | None]:
    """The application of a definition file and its trials (None when the file gives none)."""
    data, file = tomlfile.load(path, "the application definition", AppInputError)
    return parse_definition(data, file.table(None), base=file.path.parent)


def parse_definition(
    data: Mapping[str, Any], checks: Table, *, base: Path | None = None
) -> tuple[AppVariant, int | None]:
    """An application from a table of the keys above; `checks` is that table's, in its file."""
    fail = checks.error
    checks.known(data, sorted(KEYS))
    argv = data.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) and w for w in argv):
        raise fail("argv", 'expected the command as a list of words, e.g. ["lmp", "-in", "in.lj"]')
    if "/" in argv[0] and not Path(argv[0]).is_absolute() and base is not None:
        argv = [str((base / argv[0]).resolve()), *argv[1:]]  # relative to the definition file
    name = data.get("name", default_name(argv))
    if not isinstance(name, str) or not _APP_NAME.match(name) or len(name) > 64:
        raise fail("name", "expected a word of letters, digits and _ . + - (up to 64)")
    trials = checks.bounded("trials", data.get("trials"), SHARED["trials"])  # the command line's bounds
    timeout = checks.bounded("timeout", data.get("timeout"), SHARED["timeout"])
    warmup = checks.bounded("warmup", data.get("warmup"), SHARED["warmup"])
    metrics = _metrics(data, checks)
    checks.strings(data, (*FIGURE_STRINGS, "prepare", "cleanup"))
    env = data.get("env", {})
    if not isinstance(env, dict):
        raise fail("env", 'expected a table of variables, e.g. { OMP_NUM_THREADS = "2" }')
    words = []
    for var, value in env.items():
        if (
            not _ENV_NAME.match(str(var))
            or not isinstance(value, str | int | float)
            or isinstance(value, bool)
        ):
            raise fail("env", f'{var}: expected NAME = "VALUE" (NAME: letters, digits, _)')
        words.append(f"{var}={value}")
    params = app_params(
        argv,
        sorted(words),
        metrics=metrics,
        metric_file=data.get("metric_file"),
        sanity=data.get("sanity"),
        iteration_regex=data.get("iteration_regex"),
        reference=data.get("reference"),
        format=data.get("format"),
        prepare=data.get("prepare"),
        cleanup=data.get("cleanup"),
        warmup=warmup,
        timeout_s=timeout,
    )
    variant = AppVariant(PREFIX + name, params)
    _figure_spec(params, checks)  # every pattern compiles, the reference parses
    return variant, trials


def load_figures(path: Path) -> FigureSpec:
    """The figures of merit a definition file names, checked as `check --app` checks them, for reading them in
    an output the definition did not run (a Slurm job's: `tailscope jobs epilog --apps DIR`). Its other keys
    are checked by name and not used; argv may be left out."""
    data, file = tomlfile.load(path, "the application definition", AppInputError)
    checks = file.table(None)
    checks.known(data, sorted(KEYS))
    metrics = _metrics(data, checks)
    checks.strings(data, FIGURE_STRINGS)
    if not metrics and not data.get("format"):
        raise checks.error("metrics", "expected the figures of merit to read: metrics, or a format")
    params = {key: data[key] for key in FIGURE_STRINGS if data.get(key)}
    return _figure_spec({**params, "metrics": metrics}, checks)


def _metrics(data: Mapping[str, Any], checks: Table) -> list[str]:
    metrics = data.get("metrics", [])
    if isinstance(metrics, str):
        metrics = [metrics]
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise checks.error("metrics", "expected a list of 'NAME[:UNIT][:higher|lower]=REGEX' strings")
    return metrics


def _figure_spec(params: Mapping[str, Any], checks: Table) -> FigureSpec:
    try:
        return FigureSpec.from_params(params)
    except InputError as exc:
        raise checks.error(_key_of(str(exc)), str(exc)) from None


def _key_of(message: str) -> str | None:
    for option, key in _OPTION_KEYS:
        if message.startswith(option):
            return key
    return None


# the command line's option in a figure error -> the definition's key
_OPTION_KEYS = (
    ("--metric ", "metrics"),
    ("--metric-file", "metric_file"),
    ("--sanity", "sanity"),
    ("--iteration-regex", "iteration_regex"),
    ("--reference", "reference"),
    ("--format", "format"),
)
