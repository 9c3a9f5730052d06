"""Slurm accounting records: `sacct -P` run live, or a saved dump, parsed strictly into the `jobs` table.

The live command (`sacct_command`): `sacct --parsable2 --delimiter D --allocations --allusers --starttime
START --endtime now --format FIELDS` (every state: no --state; -X: one row per allocation; without
--duplicates a requeued job is its last run), with `TZ=UTC` and `SLURM_TIME_FORMAT=standard` so its times are
UTC ISO. Its output goes to a temporary file read by the same parser as a dump.

Users' text: Slurm keeps a job name or comment exactly as the user gave it, `|` and line breaks included, and
sacct prints it unescaped (verified with Slurm 22.05: `sbatch -J 'a|b'` prints `a|b`, a name holding a line
break prints two lines), so with sacct's default delimiter a user can split a field, or write a line that
reads as a record of its own. collect's delimiter D is new for each run (`delimiter()`: 16 random characters
between two \\x1f), so no user text can hold it, and a record is read across the line breaks its fields
hold. A dump's delimiter is read from its header line (the characters between its first two names): a dump
written with `--delimiter` is read the same way; one with '|' is read a line per record, the pieces of a
line with too many fields joined back into its one free-text column where it has only one, else refused.

A dump (`--sacct-file`): `sacct -P -o FIELDS ...` output with its header line (names as sacct prints them, in
any case and order; other columns are ignored), opened as userfile opens a user's path (a regular file: a
FIFO or a device is refused). Required: JobID, JobName, User, Partition, NodeList, NNodes, AllocCPUS (or
NCPUS), ElapsedRaw (or Elapsed), Start, End, State. Read when present: Cluster, Account, Submit, ExitCode,
Comment. Times without a zone are this machine's local time (`TZ=UTC tailscope jobs collect ...` reads a
dump written with `TZ=UTC sacct ...`); a time with an offset is taken as written.

Rows: a step (`123.batch`, `123.0`) is skipped (the allocation row carries the job); a job without an end
(still pending or running) is skipped and collected when it has ended; one JobID seen more than once (a dump
made with --duplicates) keeps its last run (the latest start). Any field that is not what sacct writes is one
`SacctError` naming the file, the line and the field, and nothing is stored; a user's text longer than
MAX_FIELD is cut there, never refused (one user's job name does not stop a site's collect)."""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope import hostlist, userfile
from tailscope.errors import InputError
from tailscope.printable import printable

if TYPE_CHECKING:
    import pyarrow as pa

# What collect asks sacct for (the README lists it for --sacct-file).
FIELDS = (
    "JobID", "JobName", "User", "Account", "Partition", "NodeList", "NNodes", "AllocCPUS", "ElapsedRaw",
    "Submit", "Start", "End", "State", "ExitCode", "Comment", "Cluster",
)  # fmt: skip
OPTIONAL = ("Account", "Submit", "ExitCode", "Comment", "Cluster")
REQUIRED = ("JobID", "JobName", "User", "Partition", "NodeList", "NNodes", "Start", "End", "State")
ALTERNATIVES = {"AllocCPUS": ("AllocCPUS", "NCPUS"), "ElapsedRaw": ("ElapsedRaw", "Elapsed")}
FREE_TEXT = frozenset({"jobname", "comment", "submitline", "workdir", "constraints", "reason", "admincomment",
                       "systemcomment", "extra", "wckey"})  # fmt: skip
MAX_LINE = 1 << 20  # bytes of one record line: a job name or comment is never near it
MAX_FIELD = 4096  # characters of a stored text field (a name, a comment): a longer one is cut there
MAX_DUMP = 1 << 40  # bytes of a dump: any real one (a regular file is all userfile's open is for here)
DELIMITER_CHARS = "!#$&()*+,-./:;<=>?@[]^{}~"  # collect's delimiter: \x1f, 16 of these, \x1f (no % or \\)
SAFE_DUMP = "sacct -P --delimiter=$'\\x1f#%\\x1f' ..."
SACCT_TIMEOUT_S = 600.0

# 123, 123_4 (array task), 123_[1-5%2] (pending array), 123+0 (heterogeneous component); then .step
_JOBID = re.compile(r"^(\d+(?:_\d+|_\[[0-9,%\-]*\]|\+\d+)?)(\.[A-Za-z0-9_+\-]+)?$")
_STATE = re.compile(r"^([A-Z_]+)\+?(?: by \d+)?$")  # "CANCELLED by 1000"; sacct -P never truncates (no '+')
_EXIT = re.compile(r"^\d+:\d+$")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")  # [D-][HH:]MM:SS[.mmm]
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[+-]\d{2}:?\d{2}|Z)?$")
_HEADER = re.compile(r"([A-Za-z][A-Za-z0-9_]*)([^A-Za-z0-9_]{1,64})[A-Za-z]")  # a name, the delimiter
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
_NO_NODES = frozenset({"", "None assigned", "(null)"})
UNFINISHED = frozenset({"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "RESIZING", "REQUEUE_HOLD",
                        "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "CONFIGURING", "COMPLETING"})  # fmt: skip


class SacctError(InputError):
    """sacct output (a dump or the live command's) that is not what sacct writes, or sacct that failed."""


@dataclass
class Parsed:
    rows: list[dict[str, Any]]
    lines: int = 0
    steps: int = 0
    unfinished: int = 0
    duplicates: int = 0

    def sentence(self, where: str) -> str:
        text = f"{where}: {len(self.rows)} finished jobs read"
        extra = []
        if self.unfinished:
            extra.append(f"{self.unfinished} not ended yet (collected when they have)")
        if self.steps:
            extra.append(f"{self.steps} step rows skipped")
        if self.duplicates:
            extra.append(f"{self.duplicates} earlier runs of requeued jobs left out")
        return text + (f" ({'; '.join(extra)})" if extra else "")


class _Line:
    def __init__(self, where: str, number: int, values: dict[str, str]) -> None:
        self.where, self.number, self.values = where, number, values

    def fail(self, field: str, expected: str) -> SacctError:
        got = self.values.get(field.lower(), "")
        shown = printable(got if len(got) <= 60 else got[:57] + "...")
        return SacctError(f"{self.where}:{self.number}: {field}: expected {expected}, got {shown!r}")

    def text(self, field: str) -> str | None:
        """A free-text field as written (empty allowed: a site's records hold jobs without a partition); one
        longer than MAX_FIELD is cut there (a user's job name never stops a collect)."""
        value = self.values.get(field.lower())
        if value is None:
            return None
        return value if len(value) <= MAX_FIELD else value[: MAX_FIELD - 3] + "..."  # a user's text: cut

    def whole(self, field: str) -> int:
        value = self.values.get(field.lower(), "")
        if not (value.isdigit() and value.isascii() and len(value) <= 9):
            raise self.fail(field, "a whole number")
        return int(value)

    def time(self, field: str, zone: dt.tzinfo | None) -> dt.datetime | None:
        value = self.values.get(field.lower())
        if value is None or value in _NO_TIME:
            return None
        if not _TIME.match(value):
            raise self.fail(field, "a time like 2026-11-02T14:05:00 (or Unknown)")
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(field, "a real date and time") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=zone) if zone is not None else parsed.astimezone()
        return parsed.astimezone(dt.UTC)

    def elapsed(self) -> int:
        if "elapsedraw" in self.values:
            return self.whole("ElapsedRaw")
        m = _ELAPSED.match(self.values.get("elapsed", ""))
        if not m:
            raise self.fail("Elapsed", "[D-]HH:MM:SS")
        days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
        return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


@dataclass(frozen=True)
class _Layout:
    """The header's column names (lower case), the delimiter between fields, and whether every line ends
    with one (`sacct -p`)."""

    names: list[str]
    delimiter: str
    trailing: bool

    @property
    def safe(self) -> bool:
        """A delimiter no free text can be taken to hold: anything but sacct's default '|' (collect's own is
        random per run; a site's dump written with `--delimiter` is trusted to have chosen well)."""
        return self.delimiter != "|"


def _header(where: str, line: str) -> _Layout:
    text = line.rstrip("\r\n")
    m = _HEADER.match(text)
    if m is None:
        raise SacctError(
            f"{where}:1: expected a header line of sacct's field names (JobID|JobName|...), got "
            f"{printable(text[:60])!r}"
        )
    delimiter = m.group(2)
    names = [n.strip().lower() for n in text.split(delimiter)]
    trailing = bool(names) and names[-1] == ""  # `sacct -p` ends every line with the delimiter
    if trailing:
        names.pop()
    if not all(_NAME.fullmatch(n) for n in names):
        raise SacctError(
            f"{where}:1: the header's names are not all separated by {printable(delimiter)!r} (the delimiter "
            "between its first two names)"
        )
    missing = [f for f in REQUIRED if f.lower() not in names]
    missing += [f for f, alts in ALTERNATIVES.items() if not any(a.lower() in names for a in alts)]
    if missing:
        raise SacctError(
            f"{where}:1: the header names no {', '.join(missing)}; expected a `sacct -P -o FIELDS` dump with "
            f"its header line (FIELDS at least: {','.join(f for f in FIELDS if f not in OPTIONAL)})"
        )
    if len(set(names)) != len(names):
        raise SacctError(f"{where}:1: a column is named twice in the header")
    return _Layout(names, delimiter, trailing)


def _split(where: str, number: int, record: str, layout: _Layout) -> dict[str, str]:
    names, delimiter = layout.names, layout.delimiter
    parts = record.split(delimiter)
    if layout.trailing and len(parts) == len(names) + 1 and parts[-1] == "":
        parts.pop()
    if len(parts) > len(names) and not layout.safe:
        free = [i for i, n in enumerate(names) if n in FREE_TEXT]
        if len(free) == 1:  # the one free-text field held '|': join its pieces back
            i, extra = free[0], len(parts) - len(names)
            parts[i : i + extra + 1] = ["|".join(parts[i : i + extra + 1])]
    if len(parts) != len(names):
        why = (
            "a name or comment holding the delimiter?"
            if layout.safe
            else "a name or comment holding '|' or a line break where more than one free-text column was "
            f"asked for? Write the dump with sacct's --delimiter, e.g. {SAFE_DUMP}"
        )
        raise SacctError(f"{where}:{number}: {len(parts)} fields, the header has {len(names)} ({why})")
    return dict(zip(names, parts, strict=True))


def _records(where: str, lines: Iterator[tuple[int, str]], layout: _Layout) -> Iterator[tuple[int, str]]:
    """The records after the header, each with the number of the line it starts on. With '|' a line is a
    record. With a delimiter of its own (collect's, or a dump's `--delimiter`) a record is the lines that
    hold its fields' delimiters: a job name or comment may hold line breaks (Slurm keeps them as given), and
    no text of a user's can start a record of its own."""
    if not layout.safe:
        for number, text in lines:
            text = _chomp(text)
            if text.strip():
                yield number, text
        return
    wanted = len(layout.names) - 1 + int(layout.trailing)
    last_free = layout.names[-1] in FREE_TEXT and not layout.trailing
    pending: list[str] = []
    first = count = size = 0
    for number, raw in lines:
        text = _chomp(raw)
        if not pending:
            if not text.strip():
                continue
            pending, first, count, size = [text], number, 0, 0
        elif count >= wanted and last_free and layout.delimiter not in text:
            pending.append(text)  # the last field, a free text, goes on over this line
        elif count >= wanted:
            yield first, "\n".join(pending)
            if not text.strip():
                pending = []
                continue
            pending, first, count, size = [text], number, 0, 0
        else:
            pending.append(text)
        count += text.count(layout.delimiter)
        size += len(text) + 1
        if count > wanted:
            fields = count + 1 - int(layout.trailing)
            raise SacctError(
                f"{where}:{first}: {fields} fields, the header has {len(layout.names)} (a name or comment "
                "holding the delimiter?)"
            )
        if size > MAX_LINE:
            raise SacctError(f"{where}:{first}: a record of more than {MAX_LINE} bytes; not sacct output")
    if pending:
        if count < wanted:
            raise SacctError(
                f"{where}:{first}: {count + 1 - int(layout.trailing)} fields, the header has "
                f"{len(layout.names)} (the file ends inside a record)"
            )
        yield first, "\n".join(pending)


def _chomp(line: str) -> str:
    """The line without its line break ('\\r' inside a job name stays)."""
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


def _lines(path: Path, where: str) -> Iterator[tuple[int, str]]:
    """The file's lines (a line break included), read through userfile's bounded open: a regular file only
    (a FIFO or a device is refused, never waited on or read for ever), at most MAX_DUMP bytes."""
    try:
        fd = userfile.open_regular(path, limit=MAX_DUMP)
    except userfile.UnreadableFile as exc:
        raise SacctError(f"{where}: {exc.reason}") from None
    with os.fdopen(fd, "rb") as fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE:
                raise SacctError(f"{where}:{number}: a line of more than {MAX_LINE} bytes; not sacct output")
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError:
                yield number, raw.decode("latin-1")  # a job name in another encoding is still a name


def parse(path: Path, *, where: str | None = None, cluster: str | None = None,
          zone: dt.tzinfo | None = None) -> Parsed:  # fmt: skip
    """Every finished job of a `sacct -P` output file (see the module's description)."""
    where = where or str(path)
    lines = _lines(Path(path), where)
    first = next(lines, None)
    if first is None:
        raise SacctError(f"{where}: empty; expected a `sacct -P -o FIELDS` dump with its header line")
    layout = _header(where, first[1])
    out = Parsed([])
    by_key: dict[tuple[str, str], int] = {}
    for number, text in _records(where, lines, layout):
        out.lines += 1
        line = _Line(where, number, _split(where, number, text, layout))
        m = _JOBID.match(line.values["jobid"])
        if not m:
            raise line.fail("JobID", "a Slurm job id like 123, 123_4, 123+0 or 123.batch")
        if m.group(2):
            out.steps += 1
            continue
        state_m = _STATE.match(line.values["state"])
        if not state_m:
            raise line.fail("State", "a Slurm state like COMPLETED or CANCELLED by 1000")
        state = state_m.group(1)
        end = line.time("End", zone)
        start = line.time("Start", zone)
        submit = line.time("Submit", zone)
        nodelist = line.values["nodelist"]
        if nodelist in _NO_NODES:
            nodelist = ""
        else:
            try:
                hostlist.count(nodelist)
            except hostlist.HostlistError as exc:
                raise SacctError(f"{where}:{number}: NodeList: {exc}") from None
        nnodes = line.whole("NNodes")
        cpus = line.whole("AllocCPUS" if "alloccpus" in line.values else "NCPUS")
        elapsed = line.elapsed()
        exit_code = line.values.get("exitcode")
        if exit_code not in (None, "") and not _EXIT.match(exit_code):
            raise line.fail("ExitCode", "code:signal like 0:0")
        if state == "REQUEUED" and end is not None:  # an earlier run of a requeued job (a --duplicates dump)
            out.duplicates += 1
            continue
        if end is None or state in UNFINISHED:
            out.unfinished += 1
            continue
        row = {
            "cluster": (line.text("Cluster") or cluster or ""),
            "job_id": m.group(1),
            "name": line.text("JobName") or "",
            "user_name": line.text("User") or "",
            "account": line.text("Account") or None,
            "partition": line.text("Partition") or "",
            "nodelist": nodelist,
            "nnodes": nnodes,
            "cpus": cpus,
            "submit_at": submit,
            "start_at": start,
            "end_at": end,
            "elapsed_s": float(elapsed),
            "state": state,
            "exit_code": exit_code or None,
            "comment": line.text("Comment") or None,
        }
        key = (row["cluster"], row["job_id"])
        if key in by_key:  # a dump with --duplicates: the last run (latest start) is the job
            out.duplicates += 1
            old = out.rows[by_key[key]]
            if (start or end) >= (old["start_at"] or old["end_at"]):
                out.rows[by_key[key]] = row
            continue
        by_key[key] = len(out.rows)
        out.rows.append(row)
    return out


def to_table(parsed: Parsed, source: str) -> pa.Table:
    import pyarrow as pa

    from tailscope.store.campaign import utcnow
    from tailscope.store.schema import TABLES

    now = utcnow()
    rows = [{**r, "source": source, "added_at": now} for r in parsed.rows]
    return pa.Table.from_pylist(rows, schema=TABLES["jobs"].schema)


def delimiter() -> str:
    """collect's delimiter, new for each run: a job's name or comment (Slurm keeps any text a user gave, `|`
    and line breaks included) cannot hold it, so no user can split a field or start a record of their own."""
    return "\x1f" + "".join(secrets.choice(DELIMITER_CHARS) for _ in range(16)) + "\x1f"


def sacct_command(start: dt.datetime, cluster: str | None) -> list[str]:
    """The live command (sacct found on PATH, else in Slurm's usual places)."""
    tool = shutil.which("sacct") or next(
        (
            p
            for p in ("/usr/bin/sacct", "/usr/local/bin/sacct", "/opt/slurm/bin/sacct")
            if os.access(p, os.X_OK)
        ),
        None,
    )
    if tool is None:
        raise SacctError("sacct not found on PATH; run collect where Slurm's client is, or give --sacct-file")
    since = start.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    argv = [tool, "--parsable2", "--delimiter", delimiter(), "--allocations", "--allusers", "--starttime",
            since, "--endtime", "now", "--format", ",".join(FIELDS)]  # fmt: skip
    if cluster:
        argv += ["--clusters", cluster]
    return argv


def run_sacct(start: dt.datetime, cluster: str | None, *, timeout_s: float = SACCT_TIMEOUT_S) -> Parsed:
    """Run sacct (UTC times) into a temporary file and parse it; a failure is one SacctError line."""
    argv = sacct_command(start, cluster)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SACCT_")}  # SACCT_FORMAT etc. stay out
    env.update(TZ="UTC", SLURM_TIME_FORMAT="standard")
    with tempfile.TemporaryDirectory(prefix="tailscope-sacct-") as tmp:
        out = Path(tmp) / "sacct.txt"
        try:
            with open(out, "wb") as fh:
                proc = subprocess.run(argv, stdout=fh, stderr=subprocess.PIPE, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SacctError(
                f"sacct did not answer within {timeout_s:.0f} s (slurmdbd busy or down?)"
            ) from None
        if proc.returncode != 0:
            err = " ".join(proc.stderr.decode("utf-8", "replace").split())[:300]
            raise SacctError(f"sacct failed (exit {proc.returncode}): {printable(err) or 'no message'}")
        return parse(out, where="sacct", cluster=cluster, zone=dt.UTC)
