"""`tailscope jobs prolog` and `tailscope jobs epilog HISTORY`: what a node showed while a Slurm job ran.

Slurm's slurmd runs them as root on every node of every job (slurm.conf `Prolog=`, `Epilog=`, through
scripts/slurm/tailscope-jobs), with its bare environment: no PATH, no HOME, the job in SLURM_JOB_ID,
SLURMD_NODENAME, SLURM_CLUSTER_NAME (and SLURM_JOB_START_TIME from Slurm 23.02). A non-zero exit, or one
past PrologEpilogTimeout (which waits forever by default), drains the node; so both always exit 0 within
their bound (`--timeout`, 1.8 s), and say what went wrong in one line on stderr and to syslog.

- The prolog reads the node's evidence (evidence/nodespan.py: counters, gauges, every process's CPU time)
  into a state file of this job on this node (`--state-dir`, default /run/tailscope/jobs: node-local, gone
  at reboot).
- The epilog reads it again, takes the span from the prolog's reading (counters as their increase over the
  job, co-runners: the CPU time of processes outside the job; without a prolog reading the counters since
  boot, named `.total`), the digest of the node facts as the history keys them, and appends one record
  under the job id (`tailscope.jobs.store.append_epilog`); then removes the job's state file, and any left
  by jobs whose epilog never ran that are older than STATE_MAX_AGE_S.

The record (the interface with the jobs store; fields may be added, never removed):
    {"version": 1, "cluster": str|None, "job_id": str, "node": str, "at": ISO-8601 UTC (epilog time),
     "job_start": ISO|None, "span_s": float|None, "evidence": {name: number|str},
     "facts_digest": str ("": the facts could not be read within the bound),
     "epilog_cpu_s": float, "epilog_wall_s": float, "errors": [str]}

The bound holds whatever hangs: the work runs in a forked child with /dev/null for its output (a child
stuck in an uninterruptible read never holds slurmd's pipe open); the readings run in a thread of it that
is given until WRITE_RESERVE_S before the bound, after which the record is written with what was read and
the hung source named; the parent waits for the child's answer until the bound, then kills it, says so, and
exits 0 without waiting for it. Nothing heavy is imported on this path (no pandas, pyarrow, numpy).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.evidence import nodespan
from tailscope.jobs import output
from tailscope.printable import printable

DEFAULT_STATE_DIR = Path("/run/tailscope/jobs")
DEFAULT_TIMEOUT_S = 1.8  # Python's start-up comes before it: the whole epilog stays under 2 s
# The readings (the facts' digest last) may take the bound less this: the rest is for writing the record. A
# share of the bound would leave nothing to read where Python's start-up took half of it (a loaded node).
WRITE_RESERVE_S = 0.5
STATE_MAX_AGE_S = 60 * 86400  # a state file older than this is a job whose epilog never ran here
STATE_SCAN_MAX = 2000  # state files looked at for clean-up per epilog
SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RECORD_VERSION = 1
_JOB_ID = re.compile(r"[0-9]{1,10}")
_MESSAGE_MAX = 60_000  # the child's answer on the pipe
ERROR_MAX = 500  # characters of one error line in the record (the store takes at most 512)


class EpilogError(Exception):
    """One line saying why the prolog or epilog could not do its work (it still exits 0)."""


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    node: str
    cluster: str | None
    start: dt.datetime | None  # SLURM_JOB_START_TIME where Slurm sets it (23.02 and later)


def slurm_job(
    env: dict[str, str] | os._Environ[str],
    *,
    job_id: str | None = None,
    node: str | None = None,
    cluster: str | None = None,
) -> SlurmJob:
    """The job and node from the options, else from Slurm's prolog/epilog environment."""
    job = job_id or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job:
        raise EpilogError("no job: SLURM_JOB_ID is not set (not run by slurmd? give --job-id)")
    if not _JOB_ID.fullmatch(job):
        raise EpilogError(f"job id {printable(job)!r}: expected a whole number (SLURM_JOB_ID or --job-id)")
    from tailscope.node.facts import node_name  # $SLURMD_NODENAME, else the host name

    name = node or node_name()
    if not name or len(name) > 255 or "/" in name or name in (".", "..") or not name.isprintable():
        raise EpilogError(
            f"node name {printable(name)!r}: expected a Slurm node name (SLURMD_NODENAME or --node)"
        )
    start = None
    text = env.get("SLURM_JOB_START_TIME", "")
    if text.isdigit():
        start = dt.datetime.fromtimestamp(int(text), dt.UTC)
    return SlurmJob(job, name, cluster or env.get("SLURM_CLUSTER_NAME") or None, start)


# --- the state files of running jobs -------------------------------------------------------------------
def state_path(state_dir: Path, job: SlurmJob) -> Path:
    """One file per (job, node): emulated nodes share a host (and its state directory) in test clusters."""
    node = re.sub(r"[^A-Za-z0-9._-]", "_", job.node)
    return state_dir / f"job-{job.job_id}-{node}.json"


def write_state(state_dir: Path, job: SlurmJob, at: dt.datetime, reading: nodespan.Reading) -> None:
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = state_path(state_dir, job)
    data = {"version": RECORD_VERSION, "job_id": job.job_id, "node": job.node, "at": _iso(at)}
    data["reading"] = reading.to_json()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, path)  # a reader sees the old file or the whole new one
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_state(
    state_dir: Path, job: SlurmJob
) -> tuple[nodespan.Reading | None, dt.datetime | None, str | None]:
    """The prolog's reading of this job on this node and when it was taken; (None, None, why) where there
    is none or it cannot be used (why is None when the prolog simply did not run here)."""
    path = state_path(state_dir, job)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return None, None, f"prolog reading {path}: {exc.strerror or exc}"
    try:
        data = json.loads(text)
        if data.get("job_id") != job.job_id or data.get("node") != job.node:
            raise ValueError("it is another job's")
        at = dt.datetime.fromisoformat(str(data["at"]))
        return nodespan.Reading.from_json(data["reading"]), at, None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, None, f"prolog reading {path}: not usable ({exc}); the counters are since boot"


def clean_state(state_dir: Path, job: SlurmJob, now: float) -> None:
    """Remove this job's state file, and those of jobs whose epilog never ran that are past the age limit."""
    state_path(state_dir, job).unlink(missing_ok=True)
    try:
        entries = os.scandir(state_dir)
    except OSError:
        return
    with entries:
        for i, entry in enumerate(entries):
            if i >= STATE_SCAN_MAX:
                break
            if not (entry.name.startswith(("job-", ".job-")) and entry.is_file(follow_symlinks=False)):
                continue
            try:
                if now - entry.stat(follow_symlinks=False).st_mtime > STATE_MAX_AGE_S:
                    os.unlink(entry.path)
            except OSError:
                pass


# --- readings within a bound ---------------------------------------------------------------------------
Extra = tuple[str, str, Callable[[nodespan.Roots, nodespan.Reading], None]]


def read_within(
    roots: nodespan.Roots, until: float, extra: tuple[Extra, ...] = ()
) -> tuple[nodespan.Reading, list[str]]:
    """Every evidence source (and `extra` after them) in a thread, given until `until` (time.monotonic()):
    what was read by then, and one line per failed source; a source still reading at `until` is named as
    not answering, and the sources after it are left out (the thread is abandoned: it may be stuck in a
    read that no signal ends)."""
    out = nodespan.empty_reading()
    errors: list[str] = []
    at: list[tuple[str, str] | None] = [None]

    def run() -> None:
        for name, where, fn in (*nodespan.SOURCES, *extra):
            at[0] = (name, where)
            error = nodespan.read_source(name, fn, roots, out)
            if error is not None:
                errors.append(error)
        at[0] = None

    began = time.monotonic()
    thread = threading.Thread(target=run, name="evidence", daemon=True)
    thread.start()
    thread.join(max(0.0, until - began))
    current = at[0]
    found = nodespan.Reading(dict(out.counters), dict(out.gauges), dict(out.processes), out.boot_s)
    errors = list(errors)
    if thread.is_alive() and current is not None:
        name, where = current
        errors.append(
            f"{name}: no answer in time ({where}, still reading after {time.monotonic() - began:.1f} s); "
            "the sources after it were not read"
        )
    return found, errors


# --- the bound over the whole work ---------------------------------------------------------------------
def process_started() -> float:
    """time.monotonic() when this process started (Python's start-up included): /proc/self/stat's start
    time, on the boot clock."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - started
        return time.monotonic() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return time.monotonic()


def run_bounded(work: Callable[[], dict[str, Any]], deadline: float) -> dict[str, Any]:
    """`work()` in a forked child, its answer (a JSON-able dict) by `deadline` (time.monotonic()), else
    {"timeout": True}; the child is killed then and not waited for. The child's stdin, stdout and stderr
    are /dev/null: nothing it leaves behind holds the caller's output open."""
    return Bounded(work).answer(deadline)


class Bounded:
    """`work()` started in a forked child now (see run_bounded), its answer taken later with `answer()`: the
    caller goes on meanwhile. Fork before starting any thread (only the forking thread lives on in the
    child)."""

    def __init__(self, work: Callable[[], dict[str, Any]]) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(r)
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                try:
                    answer = work()
                except Exception as exc:  # its own error: reported by the parent, never a traceback
                    answer = {"failed": f"{type(exc).__name__}: {exc}"}
                data = (json.dumps(answer, default=str)[:_MESSAGE_MAX] + "\n").encode()
                while data:
                    data = data[os.write(w, data) :]
            finally:
                os._exit(code)
        os.close(w)
        self.pid, self.fd = pid, r

    def answer(self, deadline: float) -> dict[str, Any]:
        """The child's answer, or {"timeout": True} (the child killed) when it has none by `deadline`."""
        chunks: list[bytes] = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        finally:
            os.close(self.fd)
        data = b"".join(chunks)
        if not data.endswith(b"\n"):
            _kill(self.pid)
            return {"timeout": True}
        _reap(self.pid)
        try:
            answer = json.loads(data)
        except ValueError:
            answer = None
        return answer if isinstance(answer, dict) else {"failed": "the worker gave no readable answer"}


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _reap(pid, wait_s=0.05)


def _reap(pid: int, wait_s: float = 0.2) -> None:
    """Reap the child if it has ended (a child stuck in the kernel is left: init reaps it once we exit)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done or time.monotonic() >= end:
            return
        time.sleep(0.005)


# --- prolog and epilog ---------------------------------------------------------------------------------
def _iso(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _cpu_s() -> float:
    """This process's CPU time and its reaped children's (the figures' reader, dmidecode)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def facts_digest() -> str:
    """The digest the history keys this node's facts by (history/summary.py), of the facts as a campaign
    stores them (node/facts.py nodes_row: JSON with sorted keys)."""
    from tailscope.history.summary import facts_digest as digest
    from tailscope.history.summary import facts_text
    from tailscope.node.facts import collect, nodes_row

    stored = nodes_row(collect(), collected_at=None, task="")["facts"]
    return digest(facts_text(json.loads(stored)))


def prolog_work(job: SlurmJob, roots: nodespan.Roots, state_dir: Path, deadline: float) -> dict[str, Any]:
    at = dt.datetime.now(dt.UTC)
    reading, errors = read_within(roots, deadline)
    write_state(state_dir, job, at, reading)
    return {"errors": errors}


def epilog_record(
    job: SlurmJob,
    roots: nodespan.Roots,
    state_dir: Path,
    *,
    started: float,
    parent_cpu_s: float,
    until: float,
    own_pids: set[int],
    figures: Bounded | None = None,
) -> dict[str, Any]:
    """The epilog's record of this job on this node (readings until `until`, time.monotonic()); `figures`:
    the reader of the job's figures of merit (jobs/output.py), started before the readings."""
    at = dt.datetime.now(dt.UTC)
    before, prolog_at, why = read_state(state_dir, job)
    errors = [why] if why else []
    now_boot_s = time.clock_gettime(time.CLOCK_BOOTTIME)
    if before is not None and before.boot_s > now_boot_s:
        errors.append("the prolog reading is from before the node's last boot: the counters are since boot")
        before = prolog_at = None
    digest: list[str] = []

    def read_facts(_roots: nodespan.Roots, _out: nodespan.Reading) -> None:
        digest.append(facts_digest())

    after, read_errors = read_within(roots, until, (("facts", "node facts", read_facts),))
    errors += read_errors
    found: dict[str, Any] = {}
    if figures is not None:
        answer = figures.answer(until)
        if answer.get("timeout"):
            errors.append("figures: the job's output was not read in time; none recorded")
        elif answer.get("failed"):
            errors.append(f"figures: {answer['failed']}")
        else:
            found = output.kept(answer.get("figures"))
            errors += [str(e) for e in answer.get("errors") or []][:4]

    def outside_the_job(pid: int) -> bool:
        return pid in own_pids or nodespan.job_cgroup_member(pid, job.job_id, roots.proc)

    evidence = nodespan.span(before, after, exclude=outside_the_job)
    job_start = job.start or prolog_at
    span_s = None
    if before is not None:
        span_s = round(after.boot_s - before.boot_s, 3)
    elif job_start is not None:
        span_s = round((at - job_start).total_seconds(), 3)
    return {
        "version": RECORD_VERSION,
        "cluster": job.cluster,
        "job_id": job.job_id,
        "node": job.node,
        "at": _iso(at),
        "job_start": _iso(job_start) if job_start else None,
        "span_s": span_s,
        "evidence": evidence,
        "facts_digest": digest[0] if digest else "",
        "epilog_cpu_s": round(parent_cpu_s + _cpu_s(), 3),
        "epilog_wall_s": round(time.monotonic() - started, 3),
        "errors": [_line(e) for e in errors],
        **({"figures": found} if found else {}),
    }


def _line(text: str) -> str:
    """An error as the record keeps it: one line of at most ERROR_MAX characters."""
    text = " ".join(text.split())
    return text if len(text) <= ERROR_MAX else text[: ERROR_MAX - 3] + "..."


def append_record(location: str, record: dict[str, Any]) -> None:
    from tailscope.jobs.store import append_epilog  # the jobs store: cheap on this path (no pyarrow)

    append_epilog(location, record)


def log(verb: str, line: str) -> None:
    """One line on stderr and to syslog (slurmd keeps an epilog's output only when it fails)."""
    text = f"tailscope jobs {verb}: {printable(line)}"
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr, flush=True)
    try:
        import syslog

        syslog.openlog("tailscope", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_WARNING, text)
    except OSError:
        pass


def _bare_environment() -> None:
    """slurmd gives no PATH: the node facts find dmidecode and lstopo where a login shell would."""
    if not os.environ.get("PATH"):
        os.environ["PATH"] = SAFE_PATH


@dataclass(frozen=True)
class Run:
    """One prolog or epilog: its job, where it reads, and its clock (time.monotonic())."""

    job: SlurmJob
    roots: nodespan.Roots
    started: float  # the process's start
    until: float  # the readings' end
    deadline: float  # the bound


def _begin(verb: str, args: Any) -> Run | None:
    """The run's job and bounds, or None (said in one line) where Slurm's environment names no job."""
    started = process_started()
    deadline = started + args.timeout
    _bare_environment()
    try:
        job = slurm_job(os.environ, job_id=args.job_id, node=args.node, cluster=args.cluster)
    except EpilogError as exc:
        log(verb, str(exc))
        return None
    roots = nodespan.Roots.under(args.root) if args.root else nodespan.Roots()
    return Run(job, roots, started, deadline - min(WRITE_RESERVE_S, 0.3 * args.timeout), deadline)


def cmd_prolog(args: Any) -> int:
    run = _begin("prolog", args)
    if run is not None:
        answer = run_bounded(lambda: prolog_work(run.job, run.roots, args.state_dir, run.until), run.deadline)
        _report("prolog", run.job, answer, args.timeout, "no start reading stored")
    return 0


def cmd_epilog(args: Any) -> int:
    run = _begin("epilog", args)
    if run is None:
        return 0
    job = run.job
    parent_cpu_s = _cpu_s()
    parent = os.getpid()
    printing = bool(args.print)

    def work() -> dict[str, Any]:
        own = {os.getpid(), parent, _parent_of(parent)}  # this worker, the epilog, the wrapper
        files = output.JobOutput.from_env(os.environ, job.job_id, job.node)
        definition = output.definition_for(files, args.apps)
        reader = None  # forked before any thread starts here
        if definition is not None:
            reader = Bounded(lambda: output.read_figures(files, definition, run.until))
            own.add(reader.pid)
        record = epilog_record(
            job,
            run.roots,
            args.state_dir,
            started=run.started,
            parent_cpu_s=parent_cpu_s,
            until=run.until,
            own_pids=own,
            figures=reader,
        )
        stored = None
        if not printing:
            try:
                append_record(args.history, record)
            except Exception as exc:  # the store's own error: one line, never a traceback or a non-zero exit
                stored = f"not stored in {args.history}: {type(exc).__name__}: {exc}"
        clean_state(args.state_dir, job, time.time())
        return {
            "errors": record["errors"] + ([stored] if stored else []),
            "record": record if printing else None,
        }

    answer = run_bounded(work, run.deadline)
    if printing and answer.get("record") is not None:
        print(json.dumps(answer["record"], indent=2, sort_keys=True))
    _report("epilog", job, answer, args.timeout, "no record stored")
    return 0


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _report(verb: str, job: SlurmJob, answer: dict[str, Any], timeout: float, lost: str) -> None:
    where = f"job {job.job_id} on {job.node}"
    if answer.get("timeout"):
        log(verb, f"{where}: not finished within {timeout:g} s (a read or the store did not answer): {lost}")
    elif answer.get("failed"):
        log(verb, f"{where}: {answer['failed']}: {lost}")
    elif answer.get("errors"):
        log(verb, f"{where}: " + "; ".join(str(e) for e in answer["errors"]))
