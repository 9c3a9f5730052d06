"""`perf stat -I MS -x,` output into the `samples` table (source `imported:perf-csv`).

Line layouts perf writes (perf 6.1, checked on this VM; `<not counted>` / `<not supported>` in the value
field):
- aggregated:      time,value,unit,event,run_time,pcnt_running[,metric_value,metric_unit]
- per CPU (-A -a): time,CPUn,value,unit,event,run_time,pcnt_running[,...]
- per socket:      time,Sn,cpus,value,unit,event,run_time,pcnt_running[,...]   (--per-socket)
- per die / core:  time,S0-D0[-C3],cpus,value,...                              (refused: not stored per unit)
`time` is seconds since perf started; each interval's values are deltas. The samples table holds cumulative
values, so each series is summed over intervals from a sample 0 of zeros at the start; an interval whose
value is `<not counted>` adds nothing and stores no row (the series' next delta spans it); `<not supported>`
series are not stored at all. `msec` values (task-clock) are stored in nanoseconds as perf_event counts them.
Events: `pmu/event/` -> pmu and event (`msr/tsc/`, `uncore_imc_0/cas_count_read/`, `power/energy-pkg/`);
software events -> pmu `software`; other bare names -> pmu `cpu`. unit: the CPU (-A) or socket (--per-socket).
Start time (CLOCK_REALTIME): the `# started on ...` line perf writes with -o, else `--start`, else the file's
modification time minus the last interval's time (said in the result).
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.load import Transaction
from tailscope.store.schema import TABLES

SOURCE = "imported:perf-csv"
MAX_LINE = 65536
SOFTWARE = {
    "task-clock", "cpu-clock", "context-switches", "cs", "cpu-migrations", "migrations", "page-faults",
    "faults", "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy", "bpf-output",
}  # fmt: skip
_NOT = {"<not counted>", "<not supported>"}
_CPU = re.compile(r"^CPU(\d+)$")
_SOCKET = re.compile(r"^S(\d+)$")
_DIE_CORE = re.compile(r"^S\d+-D\d+(-C\d+)?$")
_PMU_EVENT = re.compile(r"^([A-Za-z0-9_.-]+)/(.+?)/([a-zA-Z]*)$")
_STARTED = re.compile(r"^#\s*started on (.+)$")


@dataclass
class ParsedPerfCsv:
    path: Path
    mode: str = "aggregated"
    started_ns: int | None = None
    times: list[float] = field(
        default_factory=list
    )  # interval end, seconds since start (sample k = index + 1)
    rows: list[tuple[int, str, int | None, str, float]] = field(
        default_factory=list
    )  # sample, pmu, unit, ev, delta
    unsupported: set[str] = field(default_factory=set)
    not_counted: int = 0


def split_event(name: str) -> tuple[str, str]:
    """perf's event column -> (pmu, event)."""
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


def parse(path: Path) -> ParsedPerfCsv:
    parsed = ParsedPerfCsv(Path(path))
    try:
        handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed by the `with` below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    seen: set[tuple[int, str, int | None, str]] = set()
    mode: str | None = None
    with handle:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):
                where = f"{path}:{number}"
                if len(line) > MAX_LINE:
                    raise ImportInputError(
                        f"{where}: line longer than {MAX_LINE} characters (not perf stat -x, output)"
                    )
                text = line.strip()
                if not text:
                    continue
                if text.startswith("#"):
                    started = _STARTED.match(text)
                    if started:
                        parsed.started_ns = _started(started.group(1), where)
                    continue
                fields = next(csv.reader([text]))
                row_mode, unit, rest = _layout(fields, where)
                if mode is None:
                    mode = row_mode
                elif row_mode != mode:
                    raise ImportInputError(
                        f"{where}: {row_mode} line in a file of {mode} lines (expected one layout per file)"
                    )
                if len(rest) < 3:
                    raise ImportInputError(
                        f"{where}: expected value,unit,event after the time (perf stat -x, output)"
                    )
                t = _number(fields[0], where, "time")
                value_text, value_unit, event_name = rest[0].strip(), rest[1].strip(), rest[2].strip()
                if not event_name:
                    raise ImportInputError(f"{where}: empty event name")
                if t < 0:
                    raise ImportInputError(
                        f"{where}: time {fields[0]} is negative (seconds since perf started)"
                    )
                if not parsed.times or t > parsed.times[-1]:
                    parsed.times.append(t)
                elif t < parsed.times[-1]:
                    raise ImportInputError(
                        f"{where}: time {fields[0]} is before the previous interval's {parsed.times[-1]} "
                        "(expected intervals in order)"
                    )
                sample = len(parsed.times)
                if value_text in _NOT:
                    if value_text == "<not supported>":
                        parsed.unsupported.add(event_name)
                    else:
                        parsed.not_counted += 1
                    continue
                value = _number(value_text, where, "value")
                if value < 0:
                    raise ImportInputError(f"{where}: value {value_text} is negative (perf counts are >= 0)")
                if value_unit == "msec":
                    value *= 1e6
                pmu, event = split_event(event_name)
                key = (sample, pmu, unit, event)
                if key in seen:
                    raise ImportInputError(
                        f"{where}: {event_name} appears twice in the interval at {fields[0]} s"
                    )
                seen.add(key)
                parsed.rows.append((sample, pmu, unit, event, value))
        except UnicodeDecodeError as exc:
            raise ImportInputError(f"{path}:{number + 1}: not UTF-8 text ({exc.reason})") from None
        except csv.Error as exc:
            raise ImportInputError(f"{path}:{number}: malformed CSV ({exc})") from None
    parsed.mode = mode or "aggregated"
    if not parsed.rows:
        raise ImportInputError(f"{path}: no counted values (expected perf stat -I MS -x, output)")
    return parsed


def _layout(fields: list[str], where: str) -> tuple[str, int | None, list[str]]:
    if len(fields) < 4:
        raise ImportInputError(
            f"{where}: {len(fields)} fields; expected time,value,unit,event,... (perf stat -I MS -x,)"
        )
    second = fields[1].strip()
    if m := _CPU.match(second):
        return "per-cpu", int(m.group(1)), fields[2:]
    if m := _SOCKET.match(second):
        return "per-socket", int(m.group(1)), fields[3:]
    if _DIE_CORE.match(second):
        raise ImportInputError(
            f"{where}: per-die/per-core output ({second}) is not supported; use -A or --per-socket"
        )
    return "aggregated", None, fields[1:]


def _started(text: str, where: str) -> int:
    try:
        stamp = dt.datetime.strptime(text.strip(), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        raise ImportInputError(f"{where}: cannot read the start time {text!r}") from None
    return int(stamp.astimezone(dt.UTC).timestamp() * 1e9)


def samples_table(parsed: ParsedPerfCsv, node: str, start_ns: int) -> pa.Table:
    """Cumulative values per series, with a sample 0 of zeros at the start."""
    series = sorted(
        {(pmu, unit, event) for _, pmu, unit, event, _ in parsed.rows}, key=lambda k: (k[0], k[1] or -1, k[2])
    )
    total = dict.fromkeys(series, 0.0)
    by_sample: dict[int, list[tuple[str, int | None, str, float]]] = {}
    for sample, pmu, unit, event, value in parsed.rows:
        by_sample.setdefault(sample, []).append((pmu, unit, event, value))
    rows: list[dict[str, Any]] = [
        {
            "node": node,
            "sample": 0,
            "t_ns": start_ns,
            "source": SOURCE,
            "pmu": p,
            "unit": u,
            "event": e,
            "value": 0.0,
        }
        for p, u, e in series
    ]
    for sample in sorted(by_sample):
        t_ns = start_ns + round(parsed.times[sample - 1] * 1e9)
        for pmu, unit, event, value in by_sample[sample]:
            total[(pmu, unit, event)] += value
            rows.append(
                {"node": node, "sample": sample, "t_ns": t_ns, "source": SOURCE, "pmu": pmu, "unit": unit,
                 "event": event, "value": total[(pmu, unit, event)]}
            )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=TABLES["samples"].schema)


def import_perf_csv(
    path: Path, load: Transaction, *, node: str | None = None, task: str, start_ns: int | None = None
) -> dict[str, Any]:
    from tailscope.node.facts import node_name
    from tailscope.store.read import connect

    parsed = parse(path)
    node = node or node_name()
    start = start_ns if start_ns is not None else parsed.started_ns
    start_from = "file" if start is not None else "mtime"
    if start is None:
        start = int((Path(path).stat().st_mtime - parsed.times[-1]) * 1e9)
    stored = None
    if load.exists:
        con = connect(load.campaign())
        try:
            stored = con.execute(
                "SELECT count(*) FROM samples WHERE node = ? AND source = ?", [node, SOURCE]
            ).fetchone()
        finally:
            con.close()
    if stored and stored[0]:
        raise ImportInputError(
            f"{path}: campaign {load.root} already holds samples of node {node} from {SOURCE}; "
            "import under another --node"
        )
    table = samples_table(parsed, node, start)
    load.write("samples", table, node=node)
    return {
        "node": node,
        "samples": len(parsed.times),
        "rows": table.num_rows,
        "mode": parsed.mode,
        "start_from": start_from,
        "not_supported": sorted(parsed.unsupported),
        "not_counted": parsed.not_counted,
    }
