"""likwid-perfctr CSV output (`likwid-perfctr -O -C ... -g GROUP ./app`) into `runs` and `counters`.

Layout (likwid 5.x `likwid.lua` printcsv; likwid 4.x writes `Core N` where 5.x writes `HWThread N`, the rest
is the same for what is read here; every table is one row per event, one column per HW thread):
    (anything the program printed: stdout and stderr saved in one file)
    STRUCT,Info,3,,,
    CPU name:,...            CPU type:,...            CPU clock:,2.1 GHz,,
    TABLE,Group 1 Raw,MEM_DP,7,,                      (or TABLE,Region R,Group 1 Raw,MEM_DP,7,, with -m)
    [Region Info,HWThread 0,HWThread 1 / RDTSC Runtime [s],... / call count,...]   (marker regions only)
    Event,Counter,HWThread 0,HWThread 1               (likwid 4.x: Event,Counter,Core 0,Core 1)
    Runtime (RDTSC) [s],TSC,1.02e+00,1.02e+00          (groups without metrics)
    INSTR_RETIRED_ANY,FIXC0,123,456
    CAS_COUNT_RD,MBOX0C0,65,-                          (uncore: on the first HW thread of each socket)
    ...
    TABLE,Group 1 Raw STAT,...   TABLE,Group 1 Metric,...   TABLE,Group 1 Metric STAT,...   (skipped)

One file is one measured run: one trial of the variant `imported:likwid-<group>` (value: the RDTSC runtime in
seconds, lower is better; the longest over the file's groups/regions). Its counts go to `counters` (source
`imported:likwid-csv`):
- core registers (FIXC, PMC, TMP, ...): one row per (register's event, HW thread), unit = HW thread;
- uncore box registers (MBOX0C0 .. MBOX7C1, CBOX12C0, SBOX, ...): one row per (event, box), pmu
  `uncore_<box>:<socket>`, unit = box number (the seed format's layout, which `metrics` reads). likwid
  writes a socket's uncore counts in the column of that socket's first measured HW thread; the socket is
  the rank of that column among the columns that hold a non-zero count of that box kind (socket 0 = the
  first such column);
- power registers (PWR0..): per socket the same way, pmu `power:<socket>`, unit = the PWR index;
- gauges (TMP registers, `TEMP_CORE`: a temperature reading, not a count) keep `width` null: nothing may
  take a delta of them; every count has width 64 (likwid already reports per-run differences).
The same event in several groups of one run (likwid's multiplexing, -g A -g B) is summed; marker regions
prefix the event with `region:`. Values `-` or `nan` (a register likwid did not read) are skipped.
The file is read line by line; counts are written in chunks of at most CHUNK_ROWS rows, each region's
tables together.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tailscope.counters.gauges import is_gauge
from tailscope.importers import ImportInputError, open_text
from tailscope.importers.rows import check_node
from tailscope.store.load import load_into
from tailscope.store.manifest import Plan
from tailscope.store.runs_row import run_row, runs_table
from tailscope.store.schema import TABLES

SOURCE = "imported:likwid-csv"
FORMAT = "likwid-csv"
MAX_LINE = 1 << 20
CHUNK_ROWS = 65536
MAX_THREAD = 2**31 - 1  # the store's unit column is int32 (HW threads and uncore box numbers)
_TABLE_RAW = re.compile(r"^(?:Region ([^,]*),)?Group (\d+) Raw$")
_THREAD = re.compile(r"^(HWThread|Core) (\d+)$")
_BOX = re.compile(r"^([A-Z][A-Z0-9]*?BOX)(\d+)(?:FIX|C\d+)?$")
_PWR = re.compile(r"^PWR(\d+)$")
_PMU = {
    "FIXC": "cpu_fixed", "PMC": "cpu", "TMP": "thermal", "PWR": "power", "MBOX": "uncore_imc",
    "CBOX": "uncore_cha", "SBOX": "uncore_upi", "QBOX": "uncore_upi", "BBOX": "uncore_ha",
    "WBOX": "uncore_pcu",
    "UBOXFIX": "uncore_ubox", "UBOX": "uncore_ubox", "MBOXFIX": "uncore_imc", "IBOX": "uncore_iio",
    "TSC": "tsc", "RBOX": "uncore_m3upi", "PBOX": "uncore_m2pcie", "VPMC": "cpu",
}  # fmt: skip
_PREFIXES = sorted(_PMU, key=len, reverse=True)


@dataclass
class LikwidTable:
    group: str
    region: str | None
    line: int
    threads: list[int] = field(default_factory=list)
    runtime: float | None = None
    rows: list[tuple[str, str, int, np.ndarray]] = field(
        default_factory=list
    )  # event, register, line, values
    count: int = 0


@dataclass
class LikwidSummary:
    groups: set[str] = field(default_factory=set)
    threads: set[int] = field(default_factory=set)
    runtimes: list[float] = field(default_factory=list)
    tables: int = 0
    rows: int = 0
    version: str = ""  # "4.x" (Core N) or "5.x" (HWThread N)
    clock_hz: float | None = None  # the Info struct's "CPU clock" (the TSC rate likwid uses)
    headers: dict[str, list[int]] = field(default_factory=dict)  # header line -> its HW threads
    digest: str = ""


def pmu_of(register: str) -> str:
    """likwid's counter register name -> the store's pmu kind (FIXC0 -> cpu_fixed, MBOX2C1 -> uncore_imc)."""
    for prefix in _PREFIXES:
        if register.startswith(prefix):
            return _PMU[prefix]
    return "likwid:" + re.sub(r"\d.*$", "", register).lower()


def _unsupported(line: str) -> str | None:
    """What another likwid layout is, when a line shows it (None: not recognisably likwid)."""
    text = line.strip()
    if text.startswith("+--") or (text.startswith("|") and text.endswith("|")):
        return (
            "likwid-perfctr's text table (run without -O) is not supported; "
            "run likwid-perfctr with -O (CSV) and save its output"
        )
    if text.startswith("# GID|") or text.startswith("# Group"):
        return "likwid-perfctr timeline mode (-t/-S) output is not supported; use -O without -t"
    if re.match(r"^Event,\s*core \d+", text, re.IGNORECASE) and "Counter" not in text:
        return (
            "likwid 3.x CSV (Event,core N without a Counter column) is not supported; use likwid 4.x or 5.x"
        )
    return None


def _value(text: str, where: str) -> float | None:
    if text in ("-", "nan", "nil", "", "NaN", "-nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ImportInputError(f"{where}: value {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ImportInputError(f"{where}: value {text!r} is not a finite count >= 0")
    return value


def _values(texts: list[str], where: str) -> np.ndarray:
    """One value per HW thread as float64, NaN where likwid did not read the register (`-`, `nan`)."""
    try:
        values = np.array(texts, dtype=np.float64)
    except ValueError:
        values = np.array([np.nan if (v := _value(t.strip(), where)) is None else v for t in texts])
    if not np.isfinite(values[~np.isnan(values)]).all() or (values < 0).any():
        for t in texts:
            _value(t.strip(), where)  # raises naming the value
    return values


def _fields(line: str, where: str) -> list[str]:
    try:
        fields = [f.strip() for f in next(csv.reader([line.rstrip("\r\n")]), [])]
    except csv.Error as exc:
        raise ImportInputError(f"{where}: malformed CSV ({exc})") from None
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def read_tables(path: Path, summary: LikwidSummary) -> Iterator[LikwidTable]:
    """Yield each `Group N Raw` table when it is complete; fills `summary` on the way."""
    current: LikwidTable | None = None
    in_header = False
    seen_likwid = False
    with open_text(path) as lines:
        for number, line in lines:
            where = f"{path}:{number}"
            if len(line) > MAX_LINE:
                raise ImportInputError(f"{where}: line longer than {MAX_LINE} characters (not likwid CSV)")
            head = line.lstrip()
            if head.startswith(("TABLE,", "STRUCT,")):
                seen_likwid = True
                if current is not None:
                    yield _finished(current, path)
                current = None
                fields = _fields(line, where)
                if fields[0] == "TABLE" and len(fields) >= 3:
                    label = ",".join(fields[1:3]) if fields[1].startswith("Region ") else fields[1]
                    m = _TABLE_RAW.match(label)
                    if m:
                        group_at = 3 if m.group(1) is not None else 2
                        if len(fields) <= group_at or not fields[group_at]:
                            raise ImportInputError(f"{where}: TABLE line without a group name")
                        current = LikwidTable(fields[group_at], m.group(1), number)
                        summary.tables += 1
                        summary.groups.add(current.group)
                        in_header = True
                continue
            if current is None:
                if seen_likwid and head.startswith("CPU clock:"):
                    summary.clock_hz = _clock_hz(_fields(line, where), where)
                if not seen_likwid or not head.strip():
                    reason = _unsupported(line)
                    if reason is not None:
                        raise ImportInputError(f"{where}: {reason}")
                continue  # the program's own output, the Info struct, STAT and Metric tables
            if '"' in line:
                fields = _fields(line, where)
            else:
                fields = line.rstrip("\r\n").split(",")
                while fields and not fields[-1].strip():
                    fields.pop()
            if not fields:
                continue
            if in_header:
                fields = [f.strip() for f in fields]
                if fields[0] == "Event":
                    _thread_columns(current, fields, where, summary)
                    in_header = False
                elif fields[0] == "RDTSC Runtime [s]" and len(fields) > 1:
                    current.runtime = max(_value(f, where) or 0.0 for f in fields[1:])
                continue
            if len(fields) != 2 + len(current.threads):
                raise ImportInputError(
                    f"{where}: {len(fields)} fields, expected {2 + len(current.threads)} "
                    "(event, counter and one value per HW thread)"
                )
            event, register = fields[0].strip(), fields[1].strip()
            if not event or not register:
                raise ImportInputError(f"{where}: empty event or counter name")
            values = _values(fields[2:], where)
            if register == "TSC" and event.startswith("Runtime"):
                finite = values[~np.isnan(values)]
                current.runtime = float(finite.max()) if len(finite) else None
                continue
            box = register_info(register)[2]
            if box is not None and box > MAX_THREAD:
                raise ImportInputError(f"{where}: counter {register}: box number above {MAX_THREAD}")
            current.rows.append((event, register, number, values))
            current.count += int(np.count_nonzero(~np.isnan(values)))
        summary.digest = lines.sha256.hexdigest()
    if current is not None:
        yield _finished(current, path)
    if not summary.tables:
        raise ImportInputError(
            f"{path}: no 'TABLE,Group N Raw,...' table (expected likwid-perfctr -O output, likwid 4.x or 5.x)"
        )


def _clock_hz(fields: list[str], where: str) -> float | None:
    m = re.match(r"^([0-9.]+)\s*([GM])Hz$", fields[1]) if len(fields) > 1 else None
    if m is None:
        return None
    try:
        value = float(m.group(1)) * (1e9 if m.group(2) == "G" else 1e6)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _thread_columns(table: LikwidTable, fields: list[str], where: str, summary: LikwidSummary) -> None:
    key = ",".join(fields)
    known = summary.headers.get(key)
    if known is not None:  # the same header as an earlier table's (every table of a run repeats it)
        table.threads.extend(known)
        return
    _parse_thread_columns(table, fields, where, summary)
    if len(summary.headers) < 64:
        summary.headers[key] = list(table.threads)


def _parse_thread_columns(table: LikwidTable, fields: list[str], where: str, summary: LikwidSummary) -> None:
    if len(fields) < 3 or fields[1] != "Counter":
        raise ImportInputError(f"{where}: expected Event,Counter,HWThread N,... after the TABLE line")
    for f in fields[2:]:
        m = _THREAD.match(f)
        if m is None:
            raise ImportInputError(
                f"{where}: column {f!r} is neither 'HWThread N' (likwid 5.x) nor 'Core N' (likwid 4.x)"
            )
        version = "4.x" if m.group(1) == "Core" else "5.x"
        if summary.version and summary.version != version:
            raise ImportInputError(
                f"{where}: {m.group(1)} columns in a file of likwid {summary.version} tables"
            )
        summary.version = version
        thread = int(m.group(2))
        if thread > MAX_THREAD:
            raise ImportInputError(f"{where}: {f}: HW thread number above {MAX_THREAD}")
        if thread in table.threads:
            raise ImportInputError(f"{where}: column {f!r} appears twice")
        table.threads.append(thread)
        summary.threads.add(thread)


def _finished(table: LikwidTable, path: Path) -> LikwidTable:
    if not table.threads:
        raise ImportInputError(
            f"{path}:{table.line}: table has no 'Event,Counter,HWThread N' header (truncated?)"
        )
    if not table.rows:
        raise ImportInputError(f"{path}:{table.line}: table has no counter values")
    return table


@functools.lru_cache(maxsize=4096)
def register_info(register: str) -> tuple[str, str | None, int | None]:
    """(pmu kind, per-socket box kind or None, box number) of a likwid counter register."""
    kind = _socket_kind(register)
    box = None
    if kind is not None:
        m = _BOX.match(register) or _PWR.match(register)
        box = int(m.group(m.lastindex or 1)) if m is not None else None
    return pmu_of(register), kind, box


_NO_BOX = -1  # unit of a per-socket register without a box number (UBOXFIX): stored as null


def table_columns(table: LikwidTable) -> dict[str, list[Any]]:
    """The counters of one table as per-row pieces: pmu, event, gauge and n (scalars of the row) with unit and
    value arrays of n entries: per HW thread for core registers, per uncore box / socket for box registers
    (values of non-lead threads dropped)."""
    prefix = "" if table.region is None else f"{table.region}:"
    threads = np.asarray(table.threads, dtype=np.int64)
    # socket of a column, per box kind: rank among the columns holding a non-zero count of that kind
    lead: dict[str, set[int]] = {}
    for _event, register, _line, values in table.rows:
        kind = register_info(register)[1]
        if kind is not None:
            lead.setdefault(kind, set()).update(threads[values > 0].tolist())  # NaN > 0 is False
    ranks = {kind: {t: i for i, t in enumerate(sorted(cols))} for kind, cols in lead.items()}
    cols: dict[str, list[Any]] = {"pmu": [], "event": [], "gauge": [], "n": [], "unit": [], "value": []}
    for event, register, _line, values in table.rows:
        pmu, kind, box = register_info(register)
        gauge = is_gauge(pmu, event)
        have = ~np.isnan(values)
        if kind is None:
            cols["pmu"].append(pmu)
            cols["event"].append(prefix + event)
            cols["gauge"].append(gauge)
            cols["n"].append(int(have.sum()))
            cols["unit"].append(threads[have])
            cols["value"].append(values[have])
            continue
        rank = ranks.get(kind, {})
        for thread, value in zip(threads[have].tolist(), values[have].tolist(), strict=True):
            if thread in rank:  # else: not a socket's lead thread; likwid did not read this box there
                cols["pmu"].append(f"{pmu}:{rank[thread]}")
                cols["event"].append(prefix + event)
                cols["gauge"].append(gauge)
                cols["n"].append(1)
                cols["unit"].append(np.array([_NO_BOX if box is None else box], dtype=np.int64))
                cols["value"].append(np.array([value]))
    return cols


def _repeat_strings(texts: list[str], counts: np.ndarray) -> pa.Array:
    """Each text repeated counts[i] times, as a dictionary-decoded string array (no Python loop per value)."""
    codes: dict[str, int] = {}
    idx = np.fromiter((codes.setdefault(t, len(codes)) for t in texts), dtype=np.int32, count=len(texts))
    dictionary = pa.array(list(codes), pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(np.repeat(idx, counts)), dictionary).cast(pa.string())


def _socket_kind(register: str) -> str | None:
    """The box kind of a per-socket register (MBOX, CBOX, PWR, ...), None for per-thread registers."""
    m = _BOX.match(register)
    if m is not None:
        return m.group(1)
    if register in ("UBOXFIX", "MBOXFIX") or register.startswith("UBOX"):
        return register.rstrip("0123456789")
    if _PWR.match(register):
        return "PWR"
    return None


def counter_chunks(path: Path, summary: LikwidSummary, run_id: str) -> Iterator[pa.Table]:
    """Arrow tables of `counters` rows, about CHUNK_ROWS each, cut between regions (so that the sums over the
    groups of one region, likwid's multiplexing, stay in one chunk)."""
    pending: dict[str, list[Any]] = {"pmu": [], "event": [], "gauge": [], "n": [], "unit": [], "value": []}
    count = 0
    region: str | None = None
    flushed: set[str | None] = set()
    for table in read_tables(path, summary):
        if table.runtime is not None:
            summary.runtimes.append(table.runtime)
        if table.region != region and count >= CHUNK_ROWS:
            flushed.add(region)
            chunk = _counters_table(pending, run_id)
            summary.rows += chunk.num_rows
            yield chunk
            pending = {k: [] for k in pending}
            count = 0
        if table.region in flushed:
            raise ImportInputError(
                f"{path}:{table.line}: region {table.region!r} appears again after other regions "
                "(expected each region's tables together, as likwid-perfctr -m writes them)"
            )
        region = table.region
        for k, pieces in table_columns(table).items():
            pending[k].extend(pieces)
        count += table.count
    if count or pending["value"]:
        chunk = _counters_table(pending, run_id)
        summary.rows += chunk.num_rows
        yield chunk


def _counters_table(cols: dict[str, list[Any]], run_id: str) -> pa.Table:
    """One chunk: the same (pmu, unit, event) in several groups summed (counts) or its last reading kept
    (gauges), rows sorted."""
    counts_per_row = np.asarray(cols["n"], dtype=np.int64)
    units = np.concatenate(cols["unit"]) if cols["unit"] else np.zeros(0, np.int64)
    flat = pa.table(
        {
            "pmu": _repeat_strings(cols["pmu"], counts_per_row),
            "unit": pa.array(units, pa.int32(), mask=units == _NO_BOX),
            "event": _repeat_strings(cols["event"], counts_per_row),
            "value": pa.array(np.concatenate(cols["value"]) if cols["value"] else [], pa.float64()),
            "gauge": pa.array(np.repeat(np.asarray(cols["gauge"], dtype=bool), counts_per_row), pa.bool_()),
        }
    )
    keys = ["pmu", "unit", "event"]
    counts = (
        flat.filter(pc.invert(flat["gauge"])).group_by(keys, use_threads=False).aggregate([("value", "sum")])
    )
    gauges = flat.filter(flat["gauge"]).group_by(keys, use_threads=False).aggregate([("value", "last")])
    counts = counts.rename_columns([*keys, "value"]).append_column(
        "width", pa.array([64] * counts.num_rows, pa.int32())
    )
    gauges = gauges.rename_columns([*keys, "value"]).append_column(
        "width", pa.nulls(gauges.num_rows, pa.int32())
    )
    both = pa.concat_tables([counts, gauges]).sort_by(
        [("pmu", "ascending"), ("unit", "ascending"), ("event", "ascending")]
    )
    n = both.num_rows
    return pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "source": pa.array([SOURCE] * n, pa.string()),
            "pmu": both["pmu"],
            "unit": both["unit"],
            "event": both["event"],
            "value": both["value"],
            "time_enabled": pa.nulls(n, pa.int64()),
            "time_running": pa.nulls(n, pa.int64()),
            "width": both["width"],
        },
        schema=TABLES["counters"].schema,
    )


def parse(path: Path) -> tuple[LikwidSummary, list[pa.Table]]:
    """Parse the whole file in memory (tests and tools; the import streams)."""
    summary = LikwidSummary()
    chunks = list(counter_chunks(Path(path), summary, "parse"))
    return summary, chunks


def import_likwid_csv(
    path: Path, campaign_dir: Path, *, node: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """One file -> one run (trial) of `imported:likwid-<group>` with its counters."""
    from tailscope.node.facts import node_name

    path = Path(path)
    node = node or node_name()
    run_id = uuid.uuid4().hex
    summary = LikwidSummary()
    with load_into(campaign_dir, f"import {FORMAT} {path.name}", create=True) as load:
        for chunk in counter_chunks(path, summary, run_id):
            load.write("counters", chunk, node=node)
        if not summary.runtimes:
            raise ImportInputError(
                f"{path}: no 'Runtime (RDTSC) [s]' or 'RDTSC Runtime [s]' line: cannot time the run"
            )
        load.record_source(summary.digest, str(path))
        groups = sorted(summary.groups)
        probe = f"imported:{name or 'likwid-' + '+'.join(groups)}"
        params = {"groups": groups}
        (trial,) = load.claim_next_trials(node, probe, 1)
        runtime = max(summary.runtimes)
        run = run_row(
            run_id=run_id, campaign=load.campaign_id, task=load.txid, node=check_node(node, str(path)),
            probe=probe, variant=probe, params=params, trial=trial, seconds=runtime, metric="runtime",
            value=runtime, unit="s", higher_is_better=False, source="import:likwid-csv",
            threads=len(summary.threads), tsc_hz=summary.clock_hz,
            summary=json.dumps(  # in the order written (the stored text as it always was)
                {"source_file": path.name, "sha256": summary.digest, "likwid": summary.version}
            ),
        )  # fmt: skip
        load.write("runs", runs_table([run]), node=node)
        load.add_plan(Plan(probe, probe, dict(params), trial + 1, imported=True))
    return {"node": node, "runs": 1, "rows": summary.rows, "trial": trial, "likwid": summary.version}
