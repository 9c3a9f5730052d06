"""A Slurm job's figures of merit, read by the epilog in the job's own output against a site's application
definition; classes.py then times the job's class by the figure instead of its elapsed time.

**Which definition.** A job that tags itself `#SBATCH --comment=tailscope:NAME` (Slurm gives the epilog
SLURM_JOB_COMMENT) is read against `APPS/NAME.toml`, where APPS is the site's directory of application
definitions (`tailscope jobs epilog --apps APPS`; the wrapper's `ARGS=--apps APPS`): the same file `check
--app` runs, of which the figure keys are used (metrics, sanity, format, metric_file; argv may be left
out). The tag also names the job's class, so the class and its figure go together. A tag without a
definition there is a class tag only; a site without --apps reads no output.

**Where.** The job's standard output, SLURM_JOB_STDOUT: a filename pattern Slurm gives the epilog unexpanded
(`%j`, `%x`, `%A_%a`, ...), expanded here as slurmstepd expands it (`expand`; a part the epilog's
environment does not give, such as the job name `%x` before Slurm 23.02, matches the one file of the
directory it can be); relative to SLURM_JOB_WORK_DIR; `slurm-%j.out` there when Slurm gives none. With the
definition's `metric_file`, that file inside the job's working directory instead (never outside it, as a
trial's metric file: userfile's `beneath`). Only on the job's first node, its batch host, which wrote the
output (the other nodes' epilogs read nothing).

**As the job's user.** The reading runs in a process of its own, forked before the epilog's other readings,
that becomes the job's user (SLURM_JOB_UID, SLURM_JOB_GID and the user's groups) before it opens anything of
the job's: root's epilog never reads what the user could not (a link to /etc/shadow, or a directory link on
the way to it, is refused by the kernel as the user's own open would be; a home directory on NFS with
root_squash is read as its owner). Through userfile.read_lines: a regular file only (a FIFO or a device is
refused at once, never waited on), only its last TAIL_BYTES (a program prints its figures at its end: a
100 GiB output costs what 1 MiB does). Through the patterns `run -- CMD` uses (app/figures.py: RE2, time
linear in the text). Within the epilog's bound: the process is killed at the readings' deadline and its
figures are lost, said in the record's `errors`.

**Stored** in the record's `figures`: `{name: {"value", "higher_is_better", "unit"}}` of each figure found
with a value > 0 (a class's slowdown is a ratio of figures), and one line in `errors` for what went wrong.
Nothing heavy is imported before the fork: the definition and the patterns are loaded in the reader.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.jobs.classby import TAG

TAIL_BYTES = 1 << 20  # of the job's output: its last MiB (a program's figures come at its end)
PIECE = 1 << 20  # a line longer than this is read in pieces
SCAN_MAX = 20_000  # directory entries looked at to find a file whose name holds a part unknown here
MAX_FIGURES = 64
MAX_UNIT = 64
DEFAULT_OUTPUT = "slurm-%j.out"  # sbatch's default (relative to the job's working directory)
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"
_PLACEHOLDER = re.compile(r"%(?:(%)|([0-9]{0,9})([AabJjNnstux]))")
_NUMERIC = frozenset("AabJjnt")  # padded to the width given (`%4a`: 0007); the others take no width


class OutputError(Exception):
    """Why a job's figures were not read (one line for the record's errors)."""


@dataclass(frozen=True)
class JobOutput:
    """What Slurm's epilog environment says of one job's output and user."""

    job_id: str
    node: str
    comment: str
    stdout: str | None  # SLURM_JOB_STDOUT, unexpanded
    work_dir: str | None
    uid: int | None
    gid: int | None
    user: str | None
    name: str | None  # SLURM_JOB_NAME (Slurm 23.02 and later)
    array_job: str | None
    array_task: str | None
    nodelist: str | None

    @classmethod
    def from_env(cls, env: Mapping[str, str], job_id: str, node: str) -> JobOutput:
        def number(key: str) -> int | None:
            value = env.get(key, "")
            return int(value) if value.isdigit() and len(value) <= 10 else None

        def digits(key: str) -> str | None:
            value = env.get(key, "")
            return value if value.isdigit() and len(value) <= 10 else None

        return cls(
            job_id=job_id,
            node=node,
            comment=env.get("SLURM_JOB_COMMENT", ""),
            stdout=env.get("SLURM_JOB_STDOUT") or None,
            work_dir=env.get("SLURM_JOB_WORK_DIR") or None,
            uid=number("SLURM_JOB_UID"),
            gid=number("SLURM_JOB_GID"),
            user=env.get("SLURM_JOB_USER") or None,
            name=env.get("SLURM_JOB_NAME") or None,
            array_job=digits("SLURM_ARRAY_JOB_ID"),
            array_task=digits("SLURM_ARRAY_TASK_ID"),
            nodelist=env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or None,
        )


def definition_for(job: JobOutput, apps: Path | None) -> Path | None:
    """The definition to read this job's output against: APPS/NAME.toml of its `tailscope:NAME` tag, where
    it exists and this node is the job's first (its batch host); else None."""
    if apps is None:
        return None
    tag = TAG.search(job.comment[:4096])
    if tag is None:
        return None
    if job.nodelist:
        from tailscope import hostlist

        try:
            first = hostlist.first(job.nodelist)
        except hostlist.HostlistError:
            first = None
        if first is not None and first != job.node:
            return None
    path = Path(apps) / f"{tag.group(1)}.toml"
    return path if path.is_file() else None


def expand(pattern: str, job: JobOutput, host: str | None = None) -> tuple[str, re.Pattern[str] | None]:
    """The file Slurm writes the batch step's output to for `pattern`: (path, None) when every part is known
    here; (its directory, a pattern of the file's name) when a part of the name is not (the job name before
    Slurm 23.02, an array's ids), to match the one file it can be. OutputError when a part of the directory
    is not known.

    As slurmstepd: a pattern holding a backslash is not expanded (the backslashes are removed); `%%` is `%`;
    `%j`, `%J` the job id; `%A`, `%a` the array's job id and task id; `%b` the task id's last digit (Slurm
    22.05 leaves it as written: either is matched); `%N` the host's short name; `%n`, `%t` 0; `%s` batch;
    `%u` the user; `%x` the job name; a width (`%4j`) pads a number with zeros (verified against the names
    Slurm 22.05's slurmstepd made: tests/jobs/test_output.py)."""
    if "\\" in pattern:
        return pattern.replace("\\", ""), None
    values: dict[str, str | None] = {
        "j": job.job_id, "J": job.job_id, "A": job.array_job, "a": job.array_task,
        "b": None,  # a digit from later Slurm versions, left as written by 22.05: either is matched
        "N": host if host is not None else socket.gethostname().split(".")[0],
        "n": "0", "t": "0", "s": "batch", "u": job.user, "x": job.name,
    }  # fmt: skip
    whole, _ = _expand(pattern, values)
    if whole is not None:
        return whole, None
    slash = pattern.rfind("/")
    directory, _ = _expand(pattern[: slash + 1], values)
    if directory is None:
        raise OutputError(
            f"the output file {pattern!r} is in a directory named by a part the epilog is not told"
        )
    _, name = _expand(pattern[slash + 1 :], values)
    return directory or ".", re.compile(name)


def _expand(pattern: str, values: Mapping[str, str | None]) -> tuple[str | None, str]:
    """(the expanded text, or None when a part is unknown; a regular expression of what it may be)."""
    text: list[str] = []
    regex: list[str] = []
    known, at = True, 0
    for m in _PLACEHOLDER.finditer(pattern):
        literal = pattern[at : m.start()]
        text.append(literal)
        regex.append(re.escape(literal))
        at = m.end()
        width, letter = m.group(2), m.group(3)
        value = "%" if m.group(1) else values[letter]
        if value is None:
            known = False
            regex.append("(?:[0-9]|%b)" if letter == "b" else "[0-9]+" if letter in _NUMERIC else "[^/]*")
            continue
        if width and letter in _NUMERIC:
            value = value.zfill(min(int(width), 64))
        text.append(value)
        regex.append(re.escape(value))
    text.append(pattern[at:])
    regex.append(re.escape(pattern[at:]))
    return ("".join(text) if known else None), "".join(regex)


def output_path(job: JobOutput, *, host: str | None = None) -> Path:
    """The job's output file (run as the job's user: a directory may have to be listed)."""
    pattern = job.stdout or (DEFAULT_ARRAY_OUTPUT if job.array_job else DEFAULT_OUTPUT)
    found, name = expand(pattern, job, host)
    base = Path(job.work_dir) if job.work_dir else None
    where = Path(found)
    if not where.is_absolute():
        if base is None:
            raise OutputError(f"the output file {pattern!r} is relative and Slurm gave no SLURM_JOB_WORK_DIR")
        where = base / where
    if name is None:
        return where
    return _the_one_match(where, name, pattern)


def _the_one_match(directory: Path, name: re.Pattern[str], pattern: str) -> Path:
    matches = []
    try:
        with os.scandir(directory) as entries:
            for i, entry in enumerate(entries):
                if i >= SCAN_MAX:
                    raise OutputError(f"{directory}: more than {SCAN_MAX} entries to find {pattern!r} among")
                if name.fullmatch(entry.name):
                    matches.append(entry.name)
    except OSError as exc:
        raise OutputError(f"{directory}: {exc.strerror or exc}") from None
    if len(matches) != 1:
        found = "no file" if not matches else f"{len(matches)} files"
        raise OutputError(
            f"{directory}: {found} named as {pattern!r} could be (a part of it is not known here)"
        )
    return directory / matches[0]


def become(job: JobOutput) -> None:
    """This process becomes the job's user (its groups too, where the system says them), for good; nothing
    to do where it is not root. OutputError where it is root and cannot."""
    if os.geteuid() != 0 or job.uid == 0:
        return
    if job.uid is None or job.gid is None:
        raise OutputError("no SLURM_JOB_UID/SLURM_JOB_GID: a job's output is read as its user only")
    try:
        if job.user:
            os.initgroups(job.user, job.gid)
        else:
            os.setgroups([job.gid])
    except (OSError, KeyError):
        os.setgroups([job.gid])
    os.setresgid(job.gid, job.gid, job.gid)
    os.setresuid(job.uid, job.uid, job.uid)
    if os.geteuid() != job.uid or os.getegid() != job.gid:  # pragma: no cover - the kernel refused silently
        raise OutputError(f"could not become the job's user (uid {job.uid})")


def read_figures(job: JobOutput, definition: Path, deadline: float) -> dict[str, Any]:
    """In the reader process: the definition (as root: a site's file), then the job's output as its user,
    matched until `deadline` (time.monotonic()). {"figures": {...}, "errors": [...], "source": path}."""
    from tailscope.app.definition import load_figures
    from tailscope.app.figures import Scan, feed_file, judge
    from tailscope.errors import InputError

    try:
        spec = load_figures(definition)
    except InputError as exc:
        return {"figures": {}, "errors": [f"figures: {exc}"]}
    try:
        become(job)
        if spec.metric_file is not None:
            if not job.work_dir:
                raise OutputError(
                    "the definition's metric_file needs SLURM_JOB_WORK_DIR, which Slurm did not give"
                )
            path, beneath = spec.metric_file, Path(job.work_dir)
        else:
            path, beneath = str(output_path(job)), None
    except (OutputError, OSError) as exc:
        return {"figures": {}, "errors": [f"figures: {exc}"]}
    scan = Scan(spec, deadline=deadline)
    try:
        why = feed_file(scan, path, limit=TAIL_BYTES, piece=PIECE, beneath=beneath, tail=True)
        if why is not None:
            return {"figures": {}, "errors": [f"figures: {why}"]}
        found = judge(scan, f"the job's output {path}", 0.0)
    finally:
        scan.close()
    figures = {
        f["name"]: {"value": f["value"], "higher_is_better": f["higher_is_better"], "unit": f.get("unit", "")}
        for f in found.figures
        if f.get("value") is not None and f["value"] > 0 and "params" not in f
    }
    errors = [f"figures: {found.error}"] if found.error else []
    return {"figures": figures, "errors": errors, "source": str(path)}


def kept(figures: Any) -> dict[str, dict[str, Any]]:
    """The reader's figures as the record takes them (it ran as the job's user: its answer is checked like
    any input); anything else left out."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(figures, dict):
        return out
    for name, figure in list(figures.items())[:MAX_FIGURES]:
        if not (isinstance(name, str) and 0 < len(name) <= 255 and name.isprintable()):
            continue
        if not isinstance(figure, dict):
            continue
        value, better, unit = figure.get("value"), figure.get("higher_is_better"), figure.get("unit", "")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        if value <= 0 or not isinstance(better, bool) or not isinstance(unit, str):
            continue
        out[name] = {"value": float(value), "higher_is_better": better, "unit": unit[:MAX_UNIT]}
    return out
