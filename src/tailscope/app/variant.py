"""An application variant: the user's command, its figures of merit and its environment, as stored data.

A variant is `app:NAME` plus its parameters: the command as a list of words, the `--env NAME=VALUE` settings
of this variant, and what reads its figures (metrics, sanity, iteration regex, format, metric file), what runs
around each trial (prepare, cleanup, warmup) and the reference. All of it is kept in the campaign's plan, so
`run --resume --campaign DIR` replays the same trials without the command line. The id hashes the sorted
parameters (as a probe variant's does): the same command with another environment is another variant.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tailscope.app.errors import AppInputError

PREFIX = "app:"
# Words of a command that start another program rather than name the application (`--name` overrides).
LAUNCHERS = frozenset(
    {
        "srun",
        "mpirun",
        "mpiexec",
        "mpiexec.hydra",
        "numactl",
        "taskset",
        "env",
        "nice",
        "chrt",
        "unshare",
        "orterun",
        "prterun",
        "ionice",
        "time",
        "stdbuf",
        "timeout",
        "hyperfine",
        "likwid-pin",
        "perf",
    }
)
DEFAULT_TIMEOUT_S = 3600.0
RUN_SETTINGS = frozenset({"warmup", "timeout_s", "reference"})  # stored with the plan, not in the identity


def default_name(argv: Sequence[str]) -> str:
    """See `application_word`: its base name."""
    at = application_word(argv)
    return os.path.basename(argv[at]) if argv else "app"


def application_word(argv: Sequence[str]) -> int:
    """Where the application is in the command: its first word that is not a launcher or one of its options
    (`mpirun -np 2 lmp`: lmp). A word after an option word without '=' (`-np 2`, `-c 0-3`) is taken as the
    option's value when it is a number or a CPU list; `NAME=VALUE` words (env) are skipped."""
    skip_value = False
    for at, word in enumerate(argv):
        base = os.path.basename(word)
        if skip_value:
            skip_value = False
            if _looks_like_value(word):
                continue
        if word.startswith("-"):
            skip_value = "=" not in word
            continue
        if "=" in word and not word.startswith("/"):  # env NAME=VALUE
            continue
        if base in LAUNCHERS or (at > 0 and _looks_like_value(word)):  # `chrt 50 prog`, `nice 5 ...`
            continue
        return at
    return 0


def _looks_like_value(word: str) -> bool:
    return bool(word) and all(c.isdigit() or c in ",-:.xX" for c in word)


@dataclass(frozen=True)
class AppSpec:
    """What the runner asks of a variant's kind (the probe catalogue's ProbeSpec fields it reads)."""

    name: str
    metric: str
    unit: str
    higher_is_better: bool
    timeout_s: float


@dataclass(frozen=True)
class AppVariant:
    probe: str  # app:NAME
    params: Mapping[str, Any] = field(default_factory=dict)

    # --- identity (as ProbeVariant) ---------------------------------------------------------------------
    @property
    def params_json(self) -> str:
        return json.dumps(dict(self.params), sort_keys=True, separators=(",", ":"))

    @property
    def variant_id(self) -> str:
        """app:NAME plus a hash of what makes its figures: the command, its environment and how its figures
        are read; not how many warm-ups, its time limit or the reference (settings of a run, kept beside)."""
        identity = {k: v for k, v in self.params.items() if k not in RUN_SETTINGS}
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha1(f"{self.probe}:{text}".encode()).hexdigest()[:8]
        return f"{self.probe}-{digest}"

    @property
    def name(self) -> str:
        return app_variant_name(self.probe, dict(self.params))

    @property
    def page_policy(self) -> None:
        return None

    @property
    def argv(self) -> list[str]:
        return [str(w) for w in self.params["argv"]]

    @property
    def env(self) -> dict[str, str]:
        return dict(str(e).split("=", 1) for e in self.params.get("env", []))

    @property
    def spec(self) -> AppSpec:
        from tailscope.app.figures import FigureSpec

        figures = FigureSpec.from_params(self.params)
        head = figures.headline()
        return AppSpec(
            self.probe,
            head.name,
            head.unit,
            head.higher_is_better,
            float(self.params.get("timeout_s") or DEFAULT_TIMEOUT_S),
        )

    def to_plan(self, trials: int) -> Any:
        from tailscope.store.manifest import Plan

        return Plan(self.variant_id, self.probe, dict(self.params), trials)

    @classmethod
    def from_plan(cls, probe: str, params: Mapping[str, Any]) -> AppVariant:
        return cls(str(probe), dict(params or {}))

    def notices(self) -> list[str]:
        """Lines for the user about the command (a launcher that reaches other nodes)."""
        return _notices(self.argv)

    # --- before anything is stored -------------------------------------------------------------------
    def preflight(self, *, cwd: Path | None = None) -> dict[str, Any]:
        """The checks a probe's --check-args does: the program exists and is executable, every pattern
        compiles, the reference parses. Raises AppInputError; returns what the trials will record."""
        from tailscope.app.figures import FigureSpec

        argv = self.argv
        if not argv or not argv[0]:
            raise AppInputError("run: empty command after --")
        FigureSpec.from_params(self.params)  # patterns compile, names are well formed
        if self.params.get("events"):
            from tailscope.app.counters import resolve

            resolve(str(self.params["events"]))  # a set that does not resolve is refused here
        program = argv[0]
        if "/" in program:
            path = Path(program) if Path(program).is_absolute() else (cwd or Path.cwd()) / program
            if not path.exists():
                raise AppInputError(f"{program}: no such program")
            if path.is_dir() or not os.access(path, os.X_OK):
                raise AppInputError(f"{program}: not executable")
            resolved = str(path.resolve())
        else:
            found = shutil.which(program, path=self.env.get("PATH", os.environ.get("PATH")))
            if found is None:
                raise AppInputError(f"{program}: no such program on PATH")
            resolved = found
        at = application_word(argv)
        if at > 0 and "/" in argv[at]:  # behind a launcher (`mpirun -np 2 ./app`): checked too, when a path
            path = Path(argv[at]) if Path(argv[at]).is_absolute() else (cwd or Path.cwd()) / argv[at]
            if not path.exists():
                raise AppInputError(f"{argv[at]}: no such program")
            if path.is_dir() or not os.access(path, os.X_OK):
                raise AppInputError(f"{argv[at]}: not executable")
        return {"program": resolved}


def app_params(argv: Sequence[str], env: Sequence[str] = (), **options: Any) -> dict[str, Any]:
    """A variant's parameters: the command, its environment (`NAME=VALUE` words) and the options given
    (None, empty ones left out, so the identity does not change when an unused option is added)."""
    params: dict[str, Any] = {"argv": [str(w) for w in argv]}
    for key in (
        "metrics",
        "metric_file",
        "sanity",
        "iteration_regex",
        "format",
        "reference",
        "prepare",
        "cleanup",
        "warmup",
        "timeout_s",
        "events",
    ):
        value = options.pop(key, None)
        if value not in (None, [], ""):
            params[key] = list(value) if isinstance(value, list | tuple) else value
    if options:
        raise TypeError(f"unknown application options {sorted(options)}")
    if env:
        params["env"] = [str(e) for e in env]
    return params


REMOTE_LAUNCHERS = frozenset({"srun", "mpirun", "mpiexec", "mpiexec.hydra", "orterun", "prterun"})


def _notices(argv: Sequence[str]) -> list[str]:
    remote = sorted({os.path.basename(w) for w in argv[: application_word(argv)]} & REMOTE_LAUNCHERS)
    if not remote:
        return []
    return [
        f"tailscope: {remote[0]} in the command: where it starts processes on other nodes, the evidence and "
        "counters cover this node only (run tailscope on each node, e.g. a campaign spec's [[apps]])"
    ]


# The command-line option of each stored parameter (the stored command line, replayed by "next:" hints).
_OPTION_OF = {
    "metrics": "--metric",
    "metric_file": "--metric-file",
    "sanity": "--sanity",
    "iteration_regex": "--iteration-regex",
    "format": "--format",
    "reference": "--reference",
    "prepare": "--prepare",
    "cleanup": "--cleanup",
    "warmup": "--warmup",
    "timeout_s": "--timeout",
    "events": "--events",
    "env": "--env",
}


def command_line(probe: str, params: Mapping[str, Any], *options: str) -> str:
    """`tailscope run [OPTIONS] -- CMD` of a stored variant, with `options` first: what replays it."""
    import shlex

    words = ["tailscope", "run", *options, "--name", probe.removeprefix(PREFIX)]
    for key, flag in _OPTION_OF.items():
        value = params.get(key)
        for item in value if isinstance(value, list) else [] if value is None else [value]:
            words += [flag, f"{item:g}" if isinstance(item, float) else str(item)]
    return " ".join(shlex.quote(w) for w in [*words, "--", *(str(a) for a in params.get("argv", []))])


def is_app(probe: str) -> bool:
    return probe.startswith(PREFIX)


def app_variant_name(probe: str, params: Mapping[str, Any]) -> str:
    """`app:lmp`, `app:lmp OMP_NUM_THREADS=2`: the variant's own environment names it (the one naming rule:
    probes/catalogue.variant_name)."""
    from tailscope.probes.catalogue import variant_name

    return variant_name(probe, dict(params))
