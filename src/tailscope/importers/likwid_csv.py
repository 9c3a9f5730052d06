"""likwid-perfctr CSV output (`likwid-perfctr -O -C ... -g GROUP ./app`) into `runs` and `counters`.

Layout (likwid 5.x, `likwid.lua` printcsv: every table is printed one row per event, one column per HW
thread):
    STRUCT,Info,3,,,
    CPU name:,...            CPU type:,...            CPU clock:,2.1 GHz,,
    TABLE,Group 1 Raw,MEM_DP,7,,                      (or TABLE,Region R,Group 1 Raw,MEM_DP,7,, with -m)
    [Region Info,HWThread 0,HWThread 1 / RDTSC Runtime [s],... / call count,...]   (marker regions only)
    Event,Counter,HWThread 0,HWThread 1
    Runtime (RDTSC) [s],TSC,1.02e+00,1.02e+00          (groups without metrics)
    INSTR_RETIRED_ANY,FIXC0,123,456
    ...
    TABLE,Group 1 Raw STAT,...   TABLE,Group 1 Metric,...   TABLE,Group 1 Metric STAT,...   (skipped)
One file is one measured run: it becomes one trial of the variant `imported:likwid-<group>` (value: the RDTSC
runtime in seconds, lower is better; the longest over the file's groups/regions) and its raw counts go to
`counters` (source `imported:likwid-csv`), one row per (counter register, HW thread): pmu from the register
(FIXC -> cpu_fixed, PMC -> cpu, MBOX -> uncore_imc, CBOX -> uncore_cha, PWR -> power, ...), unit = HW thread.
Values `-` or `nan` (a register likwid did not read on that thread) are skipped. Importing many files of one
group builds an ensemble the attribution can rank.
"""

from __future__ import annotations

import csv
import json
import math
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import ImportInputError
from tailscope.store.campaign import utcnow
from tailscope.store.load import Transaction
from tailscope.store.manifest import Plan
from tailscope.store.schema import TABLES

SOURCE = "imported:likwid-csv"
MAX_LINE = 1 << 20
_TABLE_RAW = re.compile(r"^(?:Region ([^,]*),)?Group (\d+) Raw$")
_HWTHREAD = re.compile(r"^HWThread (\d+)$")
_PMU = {
    "FIXC": "cpu_fixed", "PMC": "cpu", "TMP": "thermal", "PWR": "power", "MBOX": "uncore_imc",
    "CBOX": "uncore_cha", "SBOX": "uncore_upi", "QBOX": "uncore_upi", "BBOX": "uncore_ha",
    "WBOX": "uncore_pcu",
    "UBOXFIX": "uncore_ubox", "UBOX": "uncore_ubox", "MBOXFIX": "uncore_imc", "IBOX": "uncore_iio",
    "TSC": "tsc", "RBOX": "uncore_m3upi", "PBOX": "uncore_m2pcie", "VPMC": "cpu",
}  # fmt: skip


@dataclass
class LikwidTable:
    group: str
    region: str | None
    line: int
    threads: list[int] = field(default_factory=list)
    rows: list[tuple[str, str, int, float]] = field(default_factory=list)  # event, register, thread, value
    runtime: float | None = None


def pmu_of(register: str) -> str:
    """likwid's counter register name -> the store's pmu (FIXC0 -> cpu_fixed, MBOX2C1 -> uncore_imc)."""
    for prefix in sorted(_PMU, key=len, reverse=True):
        if register.startswith(prefix):
            return _PMU[prefix]
    return "likwid:" + re.sub(r"\d.*$", "", register).lower()


def parse(path: Path) -> list[LikwidTable]:
    try:
        handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 (closed by the `with` below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    tables: list[LikwidTable] = []
    current: LikwidTable | None = None
    in_header = False
    number = 0
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                where = f"{path}:{number}"
                if len(line) > MAX_LINE:
                    raise ImportInputError(
                        f"{where}: line longer than {MAX_LINE} characters (not likwid CSV)"
                    )
                fields = [f.strip() for f in next(csv.reader([line.rstrip("\r\n")]), [])]
                while fields and fields[-1] == "":
                    fields.pop()
                if not fields:
                    continue
                if fields[0] in ("TABLE", "STRUCT"):
                    current = None
                    if fields[0] == "TABLE" and len(fields) >= 3:
                        head = ",".join(fields[1:3]) if fields[1].startswith("Region ") else fields[1]
                        m = _TABLE_RAW.match(head)
                        if m:
                            group = fields[3] if m.group(1) is not None else fields[2]
                            current = LikwidTable(group=group, region=m.group(1), line=number)
                            tables.append(current)
                            in_header = True
                    continue
                if current is None:
                    continue
                if in_header:
                    if fields[0] == "Event":
                        if len(fields) < 3 or fields[1] != "Counter":
                            raise ImportInputError(
                                f"{where}: expected Event,Counter,HWThread N,... after the TABLE line"
                            )
                        for f in fields[2:]:
                            m = _HWTHREAD.match(f)
                            if m is None:
                                raise ImportInputError(f"{where}: column {f!r} is not 'HWThread N'")
                            current.threads.append(int(m.group(1)))
                        in_header = False
                    elif fields[0] == "RDTSC Runtime [s]" and len(fields) > 1:
                        current.runtime = max(_value(f, where) or 0.0 for f in fields[1:])
                    continue
                if len(fields) != 2 + len(current.threads):
                    raise ImportInputError(
                        f"{where}: {len(fields)} fields, expected {2 + len(current.threads)} "
                        "(event, counter and one value per HW thread)"
                    )
                event, register = fields[0], fields[1]
                if not event or not register:
                    raise ImportInputError(f"{where}: empty event or counter name")
                values = [_value(f, where) for f in fields[2:]]
                if register == "TSC" and event.startswith("Runtime"):
                    current.runtime = max((v for v in values if v is not None), default=None)
                    continue
                for thread, value in zip(current.threads, values, strict=True):
                    if value is not None:
                        current.rows.append((event, register, thread, value))
        except UnicodeDecodeError as exc:
            raise ImportInputError(f"{path}:{number + 1}: not UTF-8 text ({exc.reason})") from None
        except csv.Error as exc:
            raise ImportInputError(f"{path}:{number}: malformed CSV ({exc})") from None
    if not tables:
        raise ImportInputError(
            f"{path}: no 'TABLE,Group N Raw,...' table (expected likwid-perfctr -O output)"
        )
    for t in tables:
        if not t.threads:
            raise ImportInputError(
                f"{path}:{t.line}: table has no 'Event,Counter,HWThread ...' header (truncated?)"
            )
        if not t.rows:
            raise ImportInputError(f"{path}:{t.line}: table has no counter values")
    return tables


def _value(text: str, where: str) -> float | None:
    if text in ("-", "nan", "nil", ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ImportInputError(f"{where}: value {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise ImportInputError(f"{where}: value {text!r} is not a finite count >= 0")
    return value


def import_likwid_csv(
    path: Path, load: Transaction, *, node: str | None = None, name: str | None = None, task: str
) -> dict[str, Any]:
    """One file -> one run (trial) of `imported:likwid-<group>` with its counters, staged in `load`."""
    from tailscope.node.facts import node_name

    tables = parse(path)
    node = node or node_name()
    groups = sorted({t.group for t in tables})
    probe = f"imported:{name or 'likwid-' + '+'.join(groups)}"
    runtimes = [t.runtime for t in tables if t.runtime is not None]
    if not runtimes:
        raise ImportInputError(
            f"{path}: no 'Runtime (RDTSC) [s]' or 'RDTSC Runtime [s]' line: cannot time the run"
        )
    (trial,) = load.claim_next_trials(node, probe, 1)
    run_id = uuid.uuid4().hex
    counters: dict[tuple[str, int, str], float] = {}
    for t in tables:
        for event, register, thread, value in t.rows:
            key = (pmu_of(register), thread, event if t.region is None else f"{t.region}:{event}")
            counters[key] = counters.get(key, 0.0) + value
    params = {"groups": groups}
    runs = [
        {
            "run_id": run_id, "campaign": load.campaign_id, "node": node, "probe": probe,
            "variant": probe,
            "params": json.dumps(params, sort_keys=True), "trial": trial, "started_at": utcnow(),
            "seconds": max(runtimes), "metric": "runtime", "value": max(runtimes), "unit": "s",
            "higher_is_better": False, "status": "ok", "source": "import:likwid-csv", "task": task,
            "threads": len({th for t in tables for th in t.threads}),
            "summary": json.dumps({"source_file": Path(path).name}),
        }
    ]  # fmt: skip
    rows = [
        {"run_id": run_id, "source": SOURCE, "pmu": pmu, "unit": unit, "event": event, "value": value}
        for (pmu, unit, event), value in sorted(counters.items())
    ]
    load.add_plan(Plan(probe, probe, dict(params), trial + 1, imported=True))
    load.write("counters", pa.Table.from_pylist(rows, schema=TABLES["counters"].schema), node=node)
    load.write("runs", pa.Table.from_pylist(runs, schema=TABLES["runs"].schema), node=node)
    return {"node": node, "runs": 1, "rows": len(rows), "trial": trial}
