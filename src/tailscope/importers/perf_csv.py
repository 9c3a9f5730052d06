"""`perf stat -I MS -x,` output into the `samples` table (source `imported:perf-csv`).

Line layouts perf writes (perf 6.1, checked on this VM; `<not counted>` / `<not supported>` in the value
field):
- aggregated (also system-wide `-a` without `-A`): time,value,unit,event,run_time,pcnt_running[,metric,unit]
- per CPU (-A -a): time,CPUn,value,unit,event,run_time,pcnt_running[,...]
- per socket:      time,Sn,cpus,value,unit,event,run_time,pcnt_running[,...]   (--per-socket)
- per die / core / node: time,S0-D0[-C3],cpus,value,... / time,N0,...  (refused: not stored per unit)
`time` is seconds since perf started; each interval's values are deltas. The samples table holds cumulative
values, so each series is summed over intervals from a sample 0 of zeros at the start; an interval whose
value is `<not counted>` adds nothing and stores no row (the series' next delta spans it); `<not supported>`
series are not stored at all. `msec` values (task-clock) are stored in nanoseconds as perf_event counts them.
Events: `pmu/event/mods` -> pmu and `event:mods` (`msr/tsc/`, `cpu_core/cycles/`, `cpu_atom/instructions/u`,
`power/energy-pkg/`); bare names keep their modifiers (`cycles:D`, `instructions:u`): metrics read them as the
base event (counters/metrics.py). Software events -> pmu `software`; other bare names -> pmu `cpu`.
unit: the CPU (-A) or socket (--per-socket); none for aggregated and system-wide lines.
Uncore boxes (`uncore_imc_3/cas_count_read/`, perf --no-merge): one series per box, pmu `uncore_imc:<socket>`
(per socket; per CPU: the socket is the rank of the CPU among those that carry that box kind) or `uncore_imc`
(aggregated), unit = the box number: the layout the seed format and likwid imports use, which `metrics` reads.
Start time (CLOCK_REALTIME): the `# started on ...` line perf writes with -o, else `--start`, else the file's
modification time minus the last interval's time (said in the result line).
The file is read line by line and written in chunks of at most CHUNK_ROWS rows; memory holds one chunk and
one running total per series.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError, file_digest, open_text, stored_count
from tailscope.importers.fast_csv import FAST_BLOCK, FastReaderFallback, record_batches
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

SOURCE = "imported:perf-csv"
FORMAT = "perf-csv"
MAX_LINE = 65536
CHUNK_ROWS = 65536
MAX_UNIT = 2**31 - 1  # the store's unit column is int32
MAX_NS = 2**63 - 1  # t_ns is int64
MAX_SECONDS = 9.2e9  # below 2^63 ns
SOFTWARE = {
    "task-clock", "cpu-clock", "context-switches", "cs", "cpu-migrations", "migrations", "page-faults",
    "faults", "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy", "bpf-output",
}  # fmt: skip
_NOT = {"<not counted>", "<not supported>"}
_CPU = re.compile(r"^CPU(\d+)$")
_SOCKET = re.compile(r"^S(\d+)$")
_DIE_CORE = re.compile(r"^S\d+-D\d+(-C\d+)?$")
_NODE = re.compile(r"^N\d+$")
_PMU_EVENT = re.compile(r"^([A-Za-z0-9_.-]+)/(.+?)/([a-zA-Z]*)$")
_UNCORE_BOX = re.compile(r"^(uncore_[a-z0-9_]+?)_(\d+)$")
_STARTED = re.compile(r"^#\s*started on (.+)$")
_SEPARATORS = {";": "';'", "\t": "a tab", "|": "'|'", ":": "':'", " ": "spaces"}


@dataclass
class PerfSummary:
    mode: str | None = None
    started_ns: int | None = None
    intervals: int = 0
    last_time: float | None = None
    rows: int = 0
    series: int = 0
    unsupported: set[str] = field(default_factory=set)
    not_counted: int = 0
    digest: str = ""


def split_event(name: str) -> tuple[str, str]:
    """perf's event column -> (pmu, event with its modifiers)."""
    m = _PMU_EVENT.match(name)
    if m:
        return m.group(1), m.group(2) + (f":{m.group(3)}" if m.group(3) else "")
    base = name.split(":")[0]
    return ("software" if base in SOFTWARE else "cpu"), name


def _number(text: str, where: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ImportInputError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ImportInputError(f"{where}: {what} {text!r} is not a finite number")
    return value


def _index(text: str, where: str, what: str) -> int:
    value = int(text)
    if value > MAX_UNIT:
        raise ImportInputError(f"{where}: {what} {text} is above {MAX_UNIT} (expected a {what} number)")
    return value


def _layout(fields: list[str], where: str) -> tuple[str, int | None, list[str]]:
    if len(fields) < 4:
        raise ImportInputError(
            f"{where}: {len(fields)} fields; expected time,value,unit,event,... (perf stat -I MS -x,)"
        )
    second = fields[1].strip()
    if not second[:1].isalpha():
        return "aggregated", None, fields[1:]
    if m := _CPU.match(second):
        return "per-cpu", _index(m.group(1), where, "CPU"), fields[2:]
    if m := _SOCKET.match(second):
        return "per-socket", _index(m.group(1), where, "socket"), fields[3:]
    if _DIE_CORE.match(second):
        raise ImportInputError(
            f"{where}: per-die/per-core output ({second}) is not supported; use -A or --per-socket"
        )
    if _NODE.match(second):
        raise ImportInputError(
            f"{where}: per-node output ({second}) is not supported; use -A or --per-socket"
        )
    return "aggregated", None, fields[1:]


def _not_this_format(text: str, where: str) -> None:
    """A line that is not -x, CSV: say what it is when it is something perf writes."""
    if "Performance counter stats for" in text or re.match(r"^#\s+time\s+counts", text):
        raise ImportInputError(
            f"{where}: the human-readable `perf stat` table is not supported; run perf stat with "
            "-x, (CSV) and -I MS"
        )
    if "," not in text:
        for sep, name in _SEPARATORS.items():
            parts = text.split(sep)
            if len(parts) >= 4 and re.match(r"^\s*[0-9.]+\s*$", parts[0]):
                raise ImportInputError(
                    f"{where}: fields separated by {name}: perf stat -x with another separator; "
                    "this importer reads -x, (comma)"
                )
    head = text.split(",", 1)[0].strip()
    if re.match(r"^[0-9.]+ +\S", head):
        raise ImportInputError(
            f"{where}: this looks like the human-readable `perf stat -I` table (columns separated by "
            "spaces); run perf stat with -x, (CSV)"
        )


def _time_range(where: str, text: str) -> str:
    return (
        f"{where}: time {text.strip()} s is out of range (expected seconds since perf started, below "
        f"{MAX_SECONDS:.3g} s: the store keeps times as 64-bit nanoseconds)"
    )


def _started(text: str, where: str) -> int:
    try:
        stamp = dt.datetime.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")
        return int(stamp.astimezone(dt.UTC).timestamp() * 1e9)
    except (ValueError, OverflowError, OSError):
        raise ImportInputError(f"{where}: cannot read the start time {text!r}") from None


def last_interval_time(path: Path) -> float | None:
    """The time of the file's last data line, read from its tail (for a start guessed from the mtime)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - 65536))
            tail = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(tail):
        text = line.strip()
        if text and not text.startswith("#"):
            try:
                value = float(text.split(",", 1)[0])
            except ValueError:
                return None
            return value if 0 <= value < MAX_SECONDS else None
    return None


class _Series:
    """Running totals and the chunk being filled."""

    def __init__(self, node: str, start_ns: int) -> None:
        self.node, self.start_ns = node, start_ns
        self.total: dict[tuple[str, int | None, str], float] = {}
        self.cols: dict[str, list[Any]] = {k: [] for k in ("sample", "t_ns", "pmu", "unit", "event", "value")}

    def add(self, sample: int, t_ns: int, key: tuple[str, int | None, str], delta: float, where: str) -> None:
        if key not in self.total:
            self.total[key] = 0.0
            self._row(0, self.start_ns, key, 0.0)
        value = self.total[key] + delta
        if not math.isfinite(value):
            raise ImportInputError(f"{where}: the running total of {key[2]} overflows (values too large)")
        self.total[key] = value
        self._row(sample, t_ns, key, value)

    def _row(self, sample: int, t_ns: int, key: tuple[str, int | None, str], value: float) -> None:
        c = self.cols
        c["sample"].append(sample)
        c["t_ns"].append(t_ns)
        c["pmu"].append(key[0])
        c["unit"].append(key[1])
        c["event"].append(key[2])
        c["value"].append(value)

    def __len__(self) -> int:
        return len(self.cols["sample"])

    def take(self) -> pa.Table:
        n = len(self)
        c = self.cols
        table = pa.table(
            {
                "node": pa.array([self.node] * n, pa.string()),
                "sample": pa.array(c["sample"], pa.int64()),
                "t_ns": pa.array(c["t_ns"], pa.int64()),
                "tsc": pa.nulls(n, pa.int64()),
                "source": pa.array([SOURCE] * n, pa.string()),
                "pmu": pa.array(c["pmu"], pa.string()),
                "unit": pa.array(c["unit"], pa.int32()),
                "event": pa.array(c["event"], pa.string()),
                "value": pa.array(c["value"], pa.float64()),
            },
            schema=TABLES["samples"].schema,
        )
        self.cols = {k: [] for k in c}
        return table


def sample_chunks(
    path: Path, node: str, summary: PerfSummary, start_ns: int | None = None
) -> Iterator[pa.Table]:
    """Arrow tables of `samples` rows (cumulative per series, sample 0 = zeros), CHUNK_ROWS at most each.

    The start time: `start_ns`, else the file's `# started on` line (which perf writes first), else the file's
    modification time minus the last interval's time (`summary.started_ns` stays None then).
    """
    path = Path(path)
    start = start_ns
    seen: set[tuple[str, int | None, str]] = set()  # this interval's series (duplicates)
    socket_rank: dict[str, list[int]] = {}
    series: _Series | None = None
    keys: dict[tuple[str, int | None], tuple[str, int | None, str]] = {}
    time_text, t = "", 0.0
    spath = str(path)
    with open_text(path) as lines:
        for number, line in lines:
            where = f"{spath}:{number}"
            if len(line) > MAX_LINE:
                raise ImportInputError(
                    f"{where}: line longer than {MAX_LINE} characters (not perf stat -x, output)"
                )
            text = line.strip()
            if not text:
                continue
            if text.startswith("#"):
                if re.match(r"^#\s+time\s+counts", text):
                    _not_this_format(text, where)
                started = _STARTED.match(text)
                if started and start_ns is None:
                    if series is not None:
                        raise ImportInputError(f"{where}: '# started on' after the first interval")
                    summary.started_ns = start = _started(started.group(1), where)
                continue
            if '"' in text:
                try:
                    fields = next(csv.reader([text]))
                except csv.Error as exc:
                    raise ImportInputError(f"{where}: malformed CSV ({exc})") from None
            else:
                fields = text.split(",")
            try:
                row_mode, unit, rest = _layout(fields, where)
                if time_text != fields[0]:
                    t = _number(fields[0], where, "time")
                    time_text = fields[0]
            except ImportInputError:
                _not_this_format(text, where)  # raises naming another layout perf writes, when it is one
                raise
            if summary.mode is None:
                summary.mode = row_mode
            elif row_mode != summary.mode:
                raise ImportInputError(
                    f"{where}: {row_mode} line in a file of {summary.mode} lines "
                    "(expected one layout per file)"
                )
            if len(rest) < 3:
                raise ImportInputError(
                    f"{where}: expected value,unit,event after the time (perf stat -x, output)"
                )
            value_text, value_unit, event_name = rest[0].strip(), rest[1].strip(), rest[2].strip()
            if not event_name:
                raise ImportInputError(f"{where}: empty event name")
            if t < 0:
                raise ImportInputError(f"{where}: time {fields[0]} is negative (seconds since perf started)")
            if t >= MAX_SECONDS:
                raise ImportInputError(_time_range(where, fields[0]))
            if series is None:
                if start is None:
                    last = last_interval_time(path)
                    start = int((path.stat().st_mtime - (last if last is not None else t)) * 1e9)
                series = _Series(node, start)
            if summary.last_time is None or t > summary.last_time:
                summary.last_time = t
                summary.intervals += 1
                seen.clear()
            elif t < summary.last_time:
                raise ImportInputError(
                    f"{where}: time {fields[0]} is before the previous interval's {summary.last_time} "
                    "(expected intervals in order)"
                )
            t_ns = series.start_ns + t * 1e9
            if not -MAX_NS <= t_ns <= MAX_NS:
                raise ImportInputError(_time_range(where, fields[0]))
            if value_text in _NOT:
                if value_text == "<not supported>":
                    summary.unsupported.add(event_name)
                else:
                    summary.not_counted += 1
                continue
            value = _number(value_text, where, "value")
            if value < 0:
                raise ImportInputError(f"{where}: value {value_text} is negative (perf counts are >= 0)")
            if value_unit == "msec":
                value *= 1e6
            key = keys.get((event_name, unit))
            if key is None:
                pmu, event = split_event(event_name)
                key = keys[(event_name, unit)] = _series_key(pmu, event, unit, summary.mode, socket_rank)
            if key in seen:
                raise ImportInputError(
                    f"{where}: {event_name} appears twice in the interval at {fields[0]} s"
                )
            seen.add(key)
            series.add(summary.intervals, int(t_ns), key, value, where)
            if len(series) >= CHUNK_ROWS:
                summary.rows += len(series)
                yield series.take()
        summary.digest = lines.sha256.hexdigest()
    if series is None or not series.total:
        raise ImportInputError(f"{path}: no counted values (expected perf stat -I MS -x, output)")
    summary.series = len(series.total)
    if len(series):
        summary.rows += len(series)
        yield series.take()


def _series_key(
    pmu: str, event: str, unit: int | None, mode: str | None, socket_rank: dict[str, list[int]]
) -> tuple[str, int | None, str]:
    """(pmu, unit, event) of a line; uncore boxes become (`uncore_<kind>[:<socket>]`, box, event)."""
    m = _UNCORE_BOX.match(pmu)
    if m is None:
        return pmu, unit, event
    kind, box = m.group(1), int(m.group(2))
    if box > MAX_UNIT:
        return pmu, unit, event
    if mode == "per-socket" and unit is not None:
        return f"{kind}:{unit}", box, event
    if mode == "per-cpu" and unit is not None:
        cpus = socket_rank.setdefault(kind, [])
        if unit not in cpus:
            cpus.append(unit)
        return f"{kind}:{cpus.index(unit)}", box, event
    return kind, box, event




def fast_sample_chunks(
    path: Path, node: str, summary: PerfSummary, start_ns: int | None = None
) -> Iterator[pa.Table]:
    """The same rows as sample_chunks, read by pyarrow's CSV reader in FAST_BLOCK batches with vectorised
    checks (one layout per file, as perf writes it). Anything the checks do not accept raises
    FastReaderFallback; the caller then discards what was written and runs sample_chunks, which names the
    line."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    path = Path(path)
    skip, first = 0, ""
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                text = raw.decode("utf-8").strip()
                if not text or text.startswith("#"):
                    started = _STARTED.match(text)
                    if started and start_ns is None:
                        summary.started_ns = _started(started.group(1), "")
                    skip += 1
                    continue
                first = text
                break
    except (OSError, UnicodeDecodeError, ImportInputError):
        raise FastReaderFallback from None
    if not first or '"' in first or first.startswith("\ufeff"):
        raise FastReaderFallback
    fields = first.split(",")
    try:
        mode, _, _ = _layout(fields, "")
    except ImportInputError:
        raise FastReaderFallback from None
    summary.mode = mode
    at = {"aggregated": 1, "per-cpu": 2, "per-socket": 3}[mode]
    names = [f"f{i}" for i in range(len(fields))]
    if len(fields) < at + 3:
        raise FastReaderFallback
    try:
        reader = pcsv.open_csv(
            path,
            read_options=pcsv.ReadOptions(
                skip_rows=skip, column_names=names, block_size=FAST_BLOCK, use_threads=False
            ),
            parse_options=pcsv.ParseOptions(newlines_in_values=False, quote_char=False),
            convert_options=pcsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False, null_values=[]
            ),
        )
    except (pa.ArrowInvalid, OSError):
        raise FastReaderFallback from None
    start = start_ns if start_ns is not None else summary.started_ns
    if start is None:
        last = last_interval_time(path)
        if last is None:
            raise FastReaderFallback
        start = int((path.stat().st_mtime - last) * 1e9)
    series_of: dict[tuple[str, int | None], int] = {}
    keys: list[tuple[str, int | None, str]] = []
    totals = np.zeros(0, dtype=np.float64)
    last_keys: set[int] = set()
    last_sample = -1
    socket_rank: dict[str, list[int]] = {}
    for batch in record_batches(reader):
        n = batch.num_rows
        col = [pc.utf8_trim_whitespace(batch.column(i)) for i in range(batch.num_columns)]
        try:
            t = pc.cast(col[0], pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise FastReaderFallback from None
        if not (np.isfinite(t).all() and (t >= 0).all() and (t < MAX_SECONDS).all()):
            raise FastReaderFallback
        previous = -1.0 if summary.last_time is None else summary.last_time
        steps = np.diff(np.concatenate([[previous], t]))
        if (steps < 0).any():
            raise FastReaderFallback
        sample = summary.intervals + np.cumsum(steps > 0)
        summary.intervals = int(sample[-1])
        summary.last_time = float(t[-1])
        if mode == "aggregated":
            units = np.full(n, -1, dtype=np.int64)
        else:
            prefix = "CPU" if mode == "per-cpu" else "S"
            second = col[1]
            if not pc.all(pc.starts_with(second, prefix)).as_py():
                raise FastReaderFallback
            try:
                units = pc.cast(pc.utf8_slice_codeunits(second, len(prefix)), pa.int64()).to_numpy(
                    zero_copy_only=False
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise FastReaderFallback from None
            if (units < 0).any() or (units > MAX_UNIT).any():
                raise FastReaderFallback
        value_text, value_unit, event = col[at], col[at + 1], col[at + 2]
        if pc.any(pc.equal(pc.utf8_length(event), 0)).as_py():
            raise FastReaderFallback
        unsupported = pc.equal(value_text, "<not supported>")
        not_counted = pc.equal(value_text, "<not counted>")
        summary.unsupported.update(pc.unique(pc.filter(event, unsupported)).to_pylist())
        summary.not_counted += int(pc.sum(not_counted).as_py() or 0)
        keep = pc.invert(pc.or_(unsupported, not_counted)).to_numpy(zero_copy_only=False)
        try:
            values = pc.cast(pc.filter(value_text, keep), pa.float64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise FastReaderFallback from None
        if not (np.isfinite(values).all() and (values >= 0).all()):
            raise FastReaderFallback
        msec = pc.equal(pc.filter(value_unit, keep), "msec").to_numpy(zero_copy_only=False)
        values = np.where(msec, values * 1e6, values)
        event_kept = pc.dictionary_encode(pc.filter(event, keep))
        event_names = event_kept.dictionary.to_pylist()
        event_codes = event_kept.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        unit_kept = units[keep]
        sample_kept = sample[keep]
        t_kept = t[keep]
        pairs, pair_codes = np.unique(np.stack([event_codes, unit_kept]), axis=1, return_inverse=True)
        idx_of_pair = np.empty(pairs.shape[1], dtype=np.int64)
        new_keys: list[int] = []
        for j in range(pairs.shape[1]):
            name, unit = event_names[int(pairs[0, j])], int(pairs[1, j])
            unit_or_none = None if unit < 0 else unit
            idx = series_of.get((name, unit_or_none))
            if idx is None:
                pmu, ev = split_event(name)
                keys.append(_series_key(pmu, ev, unit_or_none, mode, socket_rank))
                idx = series_of[(name, unit_or_none)] = len(keys) - 1
                new_keys.append(idx)
            idx_of_pair[j] = idx
        series = idx_of_pair[pair_codes.reshape(-1)]
        if len(set(keys)) != len(keys):
            raise FastReaderFallback  # two spellings of one series
        if new_keys:
            totals = np.concatenate([totals, np.zeros(len(new_keys))])
        # one value per series and interval
        order = np.lexsort((series, sample_kept))
        s_sorted, k_sorted = sample_kept[order], series[order]
        if ((np.diff(s_sorted) == 0) & (np.diff(k_sorted) == 0)).any():
            raise FastReaderFallback
        carried = len(sample_kept) and int(sample_kept[0]) == last_sample
        if carried and last_keys & set(series[sample_kept == last_sample].tolist()):
            raise FastReaderFallback  # the interval the previous batch ended in holds this series already
        if len(sample_kept):
            if int(sample_kept[-1]) != last_sample:
                last_keys = set()
            last_sample = int(sample_kept[-1])
            last_keys |= set(series[sample_kept == last_sample].tolist())
        cumulative = np.empty(len(values))
        by_series = np.argsort(series, kind="stable")
        bounds = np.flatnonzero(np.diff(series[by_series])) + 1
        for rows in np.split(by_series, bounds):
            if len(rows) == 0:
                continue
            k = int(series[rows[0]])
            run = np.cumsum(np.concatenate([[totals[k]], values[rows]]))[1:]
            cumulative[rows] = run
            totals[k] = run[-1]
        if not np.isfinite(cumulative).all():
            raise FastReaderFallback
        t_ns = start + t_kept * 1e9
        if len(t_ns) and not (np.abs(t_ns) < MAX_NS).all():
            raise FastReaderFallback
        zero = np.asarray(new_keys, dtype=np.int64)
        all_series = np.concatenate([zero, series])
        m = len(all_series)
        table = pa.table(
            {
                "node": pa.array([node] * m, pa.string()),
                "sample": pa.array(np.concatenate([np.zeros(len(zero), np.int64), sample_kept]), pa.int64()),
                "t_ns": pa.array(
                    np.concatenate([np.full(len(zero), start, np.int64), t_ns.astype(np.int64)])
                ),
                "tsc": pa.nulls(m, pa.int64()),
                "source": pa.array([SOURCE] * m, pa.string()),
                "pmu": pa.array([keys[i][0] for i in all_series.tolist()], pa.string()),
                "unit": pa.array([keys[i][1] for i in all_series.tolist()], pa.int32()),
                "event": pa.array([keys[i][2] for i in all_series.tolist()], pa.string()),
                "value": pa.array(np.concatenate([np.zeros(len(zero)), cumulative]), pa.float64()),
            },
            schema=TABLES["samples"].schema,
        )
        summary.rows += m
        yield table
    if not keys:
        raise FastReaderFallback
    summary.series = len(keys)
    summary.digest = file_digest(path)


def import_perf_csv(
    path: Path, campaign_dir: Path, *, node: str | None = None, start_ns: int | None = None
) -> dict[str, Any]:
    from tailscope.node.facts import node_name

    path = Path(path)
    node = node or node_name()
    try:
        summary = _import(path, campaign_dir, node, start_ns, fast_sample_chunks)
    except FastReaderFallback:
        summary = _import(path, campaign_dir, node, start_ns, sample_chunks)
    start_from = "option" if start_ns is not None else "file" if summary.started_ns is not None else "mtime"
    return {
        "node": node,
        "samples": summary.intervals,
        "rows": summary.rows,
        "series": summary.series,
        "mode": summary.mode,
        "start_from": start_from,
        "not_supported": sorted(summary.unsupported),
        "not_counted": summary.not_counted,
    }


def _import(path: Path, campaign_dir: Path, node: str, start_ns: int | None, reader: Any) -> PerfSummary:
    summary = PerfSummary()
    with load_into(campaign_dir, f"import {FORMAT} {path.name}", create=True) as load:
        if stored_count(load, "samples_of", node, SOURCE):
            raise ImportInputError(
                f"{path}: campaign {campaign_dir} already holds samples of node {node} from {SOURCE}; "
                "import under another --node"
            )
        for chunk in reader(path, node, summary, start_ns):
            load.write("samples", chunk, node=node)
        load.record_source(summary.digest, str(path))
    return summary


def parse(path: Path, node: str = "node") -> tuple[PerfSummary, list[pa.Table]]:
    """Parse the whole file in memory (tests and tools; the import streams)."""
    summary = PerfSummary()
    chunks = list(sample_chunks(Path(path), node, summary))
    return summary, chunks
