"""The background monitor: run `tsmon` (native/sampler/tsmon.c), read its file, store `samples`, cut per-trial
counter deltas.

`tsmon` writes JSON lines as it goes: a `header`, one `series` record per counter (source, pmu, unit, event,
kind counter|gauge), `warning`s, one `sample` per interval (`sample`, `tsc`, `t_ns` CLOCK_REALTIME,
`values` in series order, null where a read failed) and an `end` record when it stops cleanly. After a
SIGKILL the file ends at the last whole sample (each sample is one write); a torn last line -- only possible
when the file system filled up or the machine crashed -- is dropped and reported, everything before it kept.

Cutting a trial (`cut_trials`): a trial's timed region [t0, t1] (the run's `realtime_start_ns` and
`seconds`) usually straddles sample boundaries. Each counter's cumulative value is linearly interpolated at
t0 and t1 between the samples around them, i.e. a sample interval's increment is attributed to the trial
in proportion to the overlap (a constant rate within one interval). The delta is exact at sample boundaries
and its error is bounded by the increments of the two boundary intervals. A trial not inside the
monitored span is not cut. Gauges (frequency, temperature) are stored as samples only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tailscope.counters import eventsets
from tailscope.counters.monitor_cli import MonitorInputError, parse_interval
from tailscope.native import native_path
from tailscope.node.facts import node_name
from tailscope.store.campaign import MANIFEST, Campaign, new_task_id, safe_name
from tailscope.store.schema import TABLES

if TYPE_CHECKING:
    from tailscope.store.load import Transaction

SAMPLE_ROWS_PER_SHARD = 1_000_000


@dataclass
class MonitorFile:
    path: Path
    header: dict[str, Any]
    series: list[dict[str, Any]]
    sample: np.ndarray  # int64, sample numbers
    tsc: np.ndarray  # uint64
    t_ns: np.ndarray  # int64, CLOCK_REALTIME
    values: np.ndarray  # float64 [samples, series], NaN where the read failed
    warnings: list[str] = field(default_factory=list)
    end: dict[str, Any] | None = None
    torn_tail: bool = False  # the last line was incomplete and was dropped

    @property
    def node(self) -> str:
        return str(self.header.get("node") or "unknown")


def read(path: Path) -> MonitorFile:
    """Parse a tsmon file. Errors name path:line; an incomplete last line is dropped (torn_tail)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise MonitorInputError(f"{path}: cannot read: {exc.strerror}") from None
    lines = raw.split(b"\n")
    torn = bool(lines and lines[-1])  # text after the last newline: a write cut short
    if torn:
        lines = lines[:-1]
    header: dict[str, Any] | None = None
    series: list[dict[str, Any]] = []
    warnings: list[str] = []
    samples: list[int] = []
    tscs: list[int] = []
    times: list[int] = []
    rows: list[list[float]] = []
    end = None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MonitorInputError(f"{where}: not a JSON line ({exc})") from None
        kind = rec.get("record") if isinstance(rec, dict) else None
        if header is None:
            if kind != "header" or rec.get("format") != "tailscope-monitor":
                raise MonitorInputError(f"{where}: expected the tailscope-monitor header record first")
            header = rec
        elif kind == "series":
            if rec.get("index") != len(series):
                raise MonitorInputError(f"{where}: series index {rec.get('index')}, expected {len(series)}")
            series.append(rec)
        elif kind == "warning":
            warnings.append(str(rec.get("message")))
        elif kind == "sample":
            vals = rec.get("values")
            if not isinstance(vals, list) or len(vals) != len(series):
                got = len(vals) if isinstance(vals, list) else 0
                raise MonitorInputError(f"{where}: sample has {got} values for {len(series)} series")
            if samples and rec["sample"] != samples[-1] + 1:
                raise MonitorInputError(f"{where}: sample {rec['sample']} follows sample {samples[-1]}")
            samples.append(int(rec["sample"]))
            tscs.append(int(rec["tsc"]))
            times.append(int(rec["t_ns"]))
            rows.append([np.nan if v is None else float(v) for v in vals])
        elif kind == "end":
            end = rec
    if header is None:
        raise MonitorInputError(f"{path}: empty (no header record)")
    values = np.array(rows, dtype=float).reshape(len(rows), len(series))
    return MonitorFile(
        path=Path(path),
        header=header,
        series=series,
        sample=np.array(samples, dtype=np.int64),
        tsc=np.array(tscs, dtype=np.uint64),
        t_ns=np.array(times, dtype=np.int64),
        values=values,
        warnings=warnings,
        end=end,
        torn_tail=torn,
    )


def samples_tables(mf: MonitorFile, node: str | None = None) -> Iterator[pa.Table]:
    """`samples` rows (one per sample and series), in tables of at most SAMPLE_ROWS_PER_SHARD rows."""
    n_series = len(mf.series)
    if not n_series or not len(mf.sample):
        return
    per = max(1, SAMPLE_ROWS_PER_SHARD // n_series)
    src = [s["source"] for s in mf.series]
    pmu = [s["pmu"] for s in mf.series]
    unit = [s.get("unit") for s in mf.series]
    event = [s["event"] for s in mf.series]
    name = node or mf.node
    for lo in range(0, len(mf.sample), per):
        hi = min(len(mf.sample), lo + per)
        k = hi - lo
        vals = mf.values[lo:hi].reshape(-1)
        keep = ~np.isnan(vals)
        cols = {
            "node": pa.array([name] * (k * n_series), pa.string()),
            "sample": pa.array(np.repeat(mf.sample[lo:hi], n_series)),
            "t_ns": pa.array(np.repeat(mf.t_ns[lo:hi], n_series)),
            "tsc": pa.array(np.repeat(mf.tsc[lo:hi].astype(np.int64), n_series)),
            "source": pa.array(src * k, pa.string()),
            "pmu": pa.array(pmu * k, pa.string()),
            "unit": pa.array(unit * k, pa.int32()),
            "event": pa.array(event * k, pa.string()),
            "value": pa.array(vals),
        }
        table = pa.table(cols).filter(pa.array(keep))
        yield table.select(TABLES["samples"].names)


def store_samples(mf: MonitorFile, load: Transaction, *, node: str | None = None) -> int:
    """Stage the file's samples as `samples` shards of the transaction `load`; returns the rows staged."""
    rows = 0
    for table in samples_tables(mf, node):
        load.write("samples", table, node=node or mf.node)
        rows += table.num_rows
    return rows


def interpolate(t: np.ndarray, v: np.ndarray, at: float) -> float:
    """Cumulative value at time `at` (ns relative to the same origin as t), linear between samples."""
    return float(np.interp(at, t, v))


def cut_trials(mf: MonitorFile, trials: Sequence[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """counters rows (source monitor) for each (run_id, t0_ns, t1_ns) inside the monitored span."""
    if len(mf.sample) < 2:
        return []
    origin = int(mf.t_ns[0])
    t = (mf.t_ns - origin).astype(float)
    rows: list[dict[str, Any]] = []
    counters = [i for i, s in enumerate(mf.series) if s.get("kind", "counter") == "counter"]
    for run_id, t0_ns, t1_ns in trials:
        a, b = float(t0_ns - origin), float(t1_ns - origin)
        if a < t[0] or b > t[-1] or b <= a:
            continue
        for i in counters:
            v = mf.values[:, i]
            ok = ~np.isnan(v)
            if ok.sum() < 2:
                continue
            tv, vv = t[ok], v[ok]
            if a < tv[0] or b > tv[-1]:
                continue
            width = int(mf.series[i].get("width") or 64)
            steps = np.diff(vv)
            if width < 64:  # unwrap before interpolating
                steps = np.where(steps < 0, steps + 2.0**width, steps)
            cum = np.concatenate([[0.0], np.cumsum(steps)])
            s = mf.series[i]
            rows.append(
                {
                    "run_id": run_id,
                    "source": "monitor",
                    "pmu": s["pmu"],
                    "unit": s.get("unit"),
                    "event": s["event"],
                    "value": interpolate(tv, cum, b) - interpolate(tv, cum, a),
                    "time_enabled": int(t1_ns - t0_ns),
                    "time_running": int(t1_ns - t0_ns),
                    "width": width,
                }
            )
    return rows


def trial_windows(campaign: Campaign, node: str | None = None) -> list[tuple[str, int, int]]:
    """(run_id, t0_ns, t1_ns) of every ok run: its timed region in CLOCK_REALTIME."""
    from tailscope.store.read import connect

    con = connect(campaign)
    try:
        return con.trial_windows(node)
    finally:
        con.close()


def store_cut(mf: MonitorFile, load: Transaction, *, node: str) -> int:
    """Cut every stored trial of `node` from the monitor file into `counters` (source monitor), staged in
    the transaction `load` (the trials are those already committed to its campaign)."""
    rows = cut_trials(mf, trial_windows(load.campaign(), node))
    if rows:
        load.write("counters", pa.Table.from_pylist(rows, schema=TABLES["counters"].schema), node=node)
    return len(rows)


def store_monitor_file(path: Path, root: Path, *, node: str, cut: bool) -> int:
    """Store one monitor file's samples (and, with `cut`, each stored trial's deltas) in one transaction.
    A file already stored (same content) is skipped: `run --resume` stores the files an interrupted run left.
    Returns the sample values stored."""
    from tailscope.store.errors import StoreError
    from tailscope.store.load import load_into

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    mf = read(path)
    try:
        with load_into(root, "monitor", create=True) as load:
            load.record_source(digest, str(path))
            rows = store_samples(mf, load, node=node)
            if cut:
                store_cut(mf, load, node=node)
    except StoreError as exc:
        if "already imported" in str(exc):
            return 0
        raise
    return rows


def unstored_monitor_files(root: Path, node: str) -> list[Path]:
    """Monitor files of `node` in the campaign (runs interrupted before their samples were stored)."""
    directory = root / "monitor"
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    prefix = f"{safe_name(node)}."
    return [directory / n for n in names if n.startswith(prefix) and n.endswith(".tsmon.jsonl")]


def tsmon_argv(
    output: Path,
    *,
    interval_s: float = 1.0,
    cpu: int | None = None,
    events: str | None = None,
    duration_s: float | None = None,
    command: Sequence[str] = (),
) -> list[str]:
    argv = [str(native_path("tsmon")), "-o", str(output), "--interval", f"{interval_s * 1e3:g}ms"]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    if events:
        try:
            argv += ["--events", str(eventsets.find(events).resolve())]
        except eventsets.EventSetError as exc:
            raise MonitorInputError(str(exc)) from None
    if duration_s:
        argv += ["--duration", f"{duration_s:g}"]
    if command:
        argv += ["--", *command]
    return argv


@contextmanager
def running_monitor(
    output: Path, *, interval_s: float, events: str | None, cpu: int | None = None
) -> Iterator[Path]:
    """Run tsmon beside a block (a campaign); SIGTERM and wait at the end. Yields the output path."""
    output.parent.mkdir(parents=True, exist_ok=True)
    argv = [*tsmon_argv(output, interval_s=interval_s, cpu=cpu, events=events), "--exit-with-parent"]
    # its warnings go to a file beside the samples (a pipe nobody reads would block it on a big node)
    log_path = output.with_name(output.name + ".stderr")
    log = log_path.open("w")
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, text=True)
    ok = False
    try:
        # the header and the first sample are on disk before the block starts
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if output.exists() and b'"record":"sample"' in output.read_bytes()[-65536:]:
                break
            time.sleep(0.01)
        if proc.poll() is not None:
            log.flush()
            err = log_path.read_text().strip().splitlines()
            last = err[-1] if err else "no message"
            raise MonitorInputError(f"tsmon exited with {proc.returncode}: {last}")
        yield output
        ok = True
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        if not ok:  # a full disk, tsmon refused, the run failed: no empty file is left to store later
            discard_if_empty(output)


def discard_if_empty(output: Path) -> bool:
    """Remove a monitor file that holds nothing (0 bytes: tsmon never wrote its header) with its stderr log,
    and the monitor directory when that leaves it empty. Whether it was removed."""
    try:
        if output.stat().st_size > 0:
            return False
    except FileNotFoundError:
        pass
    for path in (output, output.with_name(output.name + ".stderr")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    with contextlib.suppress(OSError):
        output.parent.rmdir()  # only when empty
    return True


# --- the verb ---------------------------------------------------------------------------------------


def cmd_monitor(args: argparse.Namespace) -> int:
    interval = parse_interval(args.interval)
    command = list(args.command or [])
    if command and command[0] == "--":
        command = command[1:]
    if args.campaign is None and args.output is None:
        raise MonitorInputError("monitor: give -o FILE or --campaign DIR")
    if args.campaign is not None and (args.campaign / MANIFEST).exists():
        Campaign.open(args.campaign)  # a damaged manifest is refused before the monitor starts
    task = new_task_id()
    node = args.node or node_name()
    output = args.output or (args.campaign / "monitor" / f"{safe_name(node)}.{task}.tsmon.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    if command:  # the command through the one launcher (its tree dies with us), tsmon beside it
        rc = _monitor_command(command, output, interval, args)
    else:
        argv = tsmon_argv(
            output, interval_s=interval, cpu=args.cpu, events=args.events, duration_s=args.duration
        )
        # tsmon handles SIGINT/SIGTERM itself (flush, end record); we wait for it
        proc = subprocess.Popen(argv)
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:
                proc.send_signal(signal.SIGINT)
    print(f"monitor: {output}", file=sys.stderr)
    if args.campaign is not None and output.exists():
        rows = store_monitor_file(output, args.campaign, node=node, cut=False)
        print(f"stored {rows} sample values into {args.campaign}", file=sys.stderr)
    return rc


def _monitor_command(command: list[str], output: Path, interval: float, args: argparse.Namespace) -> int:
    """`monitor -- CMD`: tsmon samples while the command runs (stopped after --duration); the command's exit
    status, or 130 when interrupted (the samples taken so far are kept)."""
    from tailscope.launch import LaunchError, launch

    with running_monitor(output, interval_s=interval, events=args.events, cpu=args.cpu):
        try:
            done = launch(command, capture=False, timeout_s=args.duration)
        except LaunchError as exc:
            raise MonitorInputError(str(exc)) from None
        except KeyboardInterrupt:
            return 130
    return done.returncode


def monitor_file_for(root: Path, node: str, task: str) -> Path:
    """Where a run's monitor file lives: inside the campaign whatever the node is called."""
    return root / "monitor" / f"{safe_name(node)}.{task}.tsmon.jsonl"


__all__ = [
    "MonitorFile",
    "MonitorInputError",
    "cut_trials",
    "read",
    "running_monitor",
    "store_cut",
    "store_monitor_file",
    "store_samples",
    "unstored_monitor_files",
]
