"""Readers of applications' and benchmarks' own output, on the one reader interface (importers/reader.py).

Each reads the lines the program prints, exactly as it prints them (the fixtures under
tests/importers/fixtures/programs/ are real outputs), and gives one ProgramRun per result:

- lammps: one run per `Loop time of T on N procs for S steps with A atoms` (a log of several `run` commands
  gives several). Headline `loop_time` (s, lower is better); the `Performance:` line's figures after it
  (tau/day or ns/day, hours/ns, timesteps/s, Matom-step/s). Iterations: the seconds between thermo lines when
  the thermo style prints the `CPU` column (`thermo_style custom step ... cpu`), else none. Params: procs,
  steps, atoms.
- gromacs: md.log or mdrun's stderr: `Performance: NS_DAY HOUR_NS` after the `(ns/day) (hour/ns)` header.
  Headline `ns_per_day` (higher is better); `hours_per_ns` and the `Time:` line's wall seconds beside it.
  Params: steps (`nsteps = N` in md.log, `N steps, T ps.` on stderr) and ranks where printed.
- stream: McCalpin's stream.c: the `Copy: Scale: Add: Triad:` best rates in MB/s; headline `triad`. A
  `Failed Validation` line makes the run invalid. Params: array_size, threads (when printed).
- npb: the NAS Parallel Benchmarks' result block (`XX Benchmark Completed.` ... `Mop/s total = M`):
  headline `mops_total` (Mop/s), `time` (s) beside it; `Verification = UNSUCCESSFUL` makes the run invalid.
  Params: benchmark, class, size (and threads or processes).
- osu: an OSU micro-benchmark's table (`# OSU MPI ... Test vX`, `# Size  Latency (us)` or `Bandwidth (MB/s)`,
  then SIZE VALUE rows): one run per row, params {test, size}; latency-like columns are lower-is-better,
  bandwidth and message rates higher-is-better.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tailscope.importers.reader import Figure, LineError, LineReader, ProgramRun, bounded_int, finite

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eEdD][-+]?\d+)?"


# --- LAMMPS ------------------------------------------------------------------------------------------
_LOOP = re.compile(
    rf"^Loop time of (?P<time>{_NUMBER}) on (?P<procs>\d+) procs for (?P<steps>\d+) steps with "
    r"(?P<atoms>\d+) atoms"
)
_LAMMPS_PERF = re.compile(r"^Performance:\s*(?P<rest>.*)$")
_PERF_ITEM = re.compile(rf"^\s*(?P<value>{_NUMBER})\s+(?P<unit>\S+)\s*$")
_LAMMPS_UNITS = {  # unit -> (figure name, higher is better)
    "tau/day": ("tau_per_day", True),
    "ns/day": ("ns_per_day", True),
    "hours/ns": ("hours_per_ns", False),
    "timesteps/s": ("timesteps_per_s", True),
    "Matom-step/s": ("matom_steps_per_s", True),
    "katom-step/s": ("katom_steps_per_s", True),
}
_THREADS = re.compile(r"with (?P<tasks>\d+) MPI tasks x (?P<threads>\d+) OpenMP threads")


class LammpsReader(LineReader):
    format = "lammps"

    def __init__(self) -> None:
        super().__init__()
        self.cpu_column: int | None = None  # index of CPU in the current thermo header
        self.width = 0
        self.cpu_times: list[float] = []
        self.first = 0
        self.pending: dict[str, Any] | None = None  # a Loop line waiting for its Performance line

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        if text.startswith("Step ") or text == "Step":
            self.flush()
            names = text.split()
            self.cpu_column = names.index("CPU") if "CPU" in names else None
            self.width = len(names)
            self.cpu_times = []
            self.first = self.first or number
            return
        if self.cpu_column is not None and self.width:
            fields = text.split()
            if len(fields) == self.width and re.fullmatch(r"-?\d+", fields[0]):
                self.cpu_times.append(finite(fields[self.cpu_column], what="thermo CPU", line=number))
                return
        match = _LOOP.match(text)
        if match:
            self.flush()
            self.pending = {
                "line": number,
                "first": self.first or number,
                "time": finite(match["time"], what="Loop time", line=number),
                "procs": bounded_int(match["procs"], what="procs", line=number, low=1),
                "steps": bounded_int(match["steps"], what="steps", line=number),
                "atoms": bounded_int(match["atoms"], what="atoms", line=number, high=2**63 - 1),
                "figures": [],
                "cpu": list(self.cpu_times),
                "threads": None,
                "last": number,
            }
            self.cpu_column, self.width, self.cpu_times, self.first = None, 0, [], 0
            return
        if self.pending is None:
            return
        match = _LAMMPS_PERF.match(text)
        if match:
            for item in match["rest"].split(","):
                part = _PERF_ITEM.match(item)
                if part is None or part["unit"] not in _LAMMPS_UNITS:
                    continue
                name, higher = _LAMMPS_UNITS[part["unit"]]
                value = finite(part["value"], what=part["unit"], line=number)
                self.pending["figures"].append(Figure(name, value, part["unit"], higher, number))
            self.pending["last"] = number
            return
        match = _THREADS.search(text)
        if match:
            self.pending["threads"] = int(match["tasks"]) * int(match["threads"])
            self.pending["last"] = number

    def flush(self) -> None:
        p = self.pending
        if p is None:
            return
        self.pending = None
        cpu = p["cpu"]
        steps = [b - a for a, b in itertools.pairwise(cpu)]
        self.runs.append(
            ProgramRun(
                figures=(Figure("loop_time", p["time"], "s", False, p["line"]), *p["figures"]),
                params={"procs": p["procs"], "steps": p["steps"], "atoms": p["atoms"]},
                iterations=tuple(max(s, 0.0) for s in steps),
                first_line=p["first"],
                last_line=p["last"],
                seconds=p["time"],
                threads=p["threads"] or p["procs"],
            )
        )

    def expected(self) -> str:
        return "no LAMMPS 'Loop time of T on N procs for S steps with A atoms' line"


def detect_lammps(lines: Sequence[str]) -> bool:
    return any(line.startswith("LAMMPS (") or _LOOP.match(line.strip()) for line in lines)


# --- GROMACS -----------------------------------------------------------------------------------------
_GMX_PERF = re.compile(rf"^Performance:\s+(?P<ns_day>{_NUMBER})\s+(?P<hour_ns>{_NUMBER})\s*$")
_GMX_TIME = re.compile(rf"^Time:\s+(?P<core>{_NUMBER})\s+(?P<wall>{_NUMBER})(?:\s+{_NUMBER})?\s*$")
_GMX_NSTEPS = re.compile(r"^nsteps\s*=\s*(?P<n>-?\d+)\s*$")
_GMX_STEPS = re.compile(rf"^(?P<n>\d+) steps,\s+{_NUMBER} ps\.")
_GMX_RANKS = re.compile(r"^On (?P<n>\d+) MPI ranks?\b")


class GromacsReader(LineReader):
    format = "gromacs"

    def __init__(self) -> None:
        super().__init__()
        self.params: dict[str, int] = {}
        self.wall: tuple[float, int] | None = None
        self.header = 0  # line of the '(ns/day) (hour/ns)' header

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        for pattern, key in ((_GMX_NSTEPS, "steps"), (_GMX_STEPS, "steps"), (_GMX_RANKS, "ranks")):
            match = pattern.match(text)
            if match:
                self.params[key] = bounded_int(match["n"], what=key, line=number, high=2**63 - 1)
                return
        match = _GMX_TIME.match(text)
        if match:
            self.wall = (finite(match["wall"], what="Wall t", line=number), number)
            return
        if "(ns/day)" in text and "(hour/ns)" in text:
            self.header = number
            return
        match = _GMX_PERF.match(text)
        if match:
            if not self.header:
                raise LineError(number, "GROMACS 'Performance:' line without its '(ns/day) (hour/ns)' header")
            figures = [
                Figure(
                    "ns_per_day", finite(match["ns_day"], what="ns/day", line=number), "ns/day", True, number
                ),
                Figure(
                    "hours_per_ns",
                    finite(match["hour_ns"], what="hour/ns", line=number),
                    "hour/ns",
                    False,
                    number,
                ),
            ]
            seconds = None
            if self.wall is not None:
                seconds = self.wall[0]
                figures.append(Figure("wall_time", self.wall[0], "s", False, self.wall[1]))
            self.runs.append(
                ProgramRun(
                    figures=tuple(figures),
                    params=dict(self.params),
                    first_line=self.header,
                    last_line=number,
                    seconds=seconds,
                    threads=self.params.get("ranks"),
                )
            )
            self.params, self.wall, self.header = {}, None, 0

    def expected(self) -> str:
        return (
            "no GROMACS 'Performance: NS/DAY HOUR/NS' line (mdrun prints it at the end of md.log and stderr)"
        )


def detect_gromacs(lines: Sequence[str]) -> bool:
    return any("GROMACS - gmx mdrun" in line or "GROMACS:      gmx mdrun" in line for line in lines)


# --- STREAM ------------------------------------------------------------------------------------------
_STREAM_ROW = re.compile(
    rf"^(?P<kernel>Copy|Scale|Add|Triad):\s+(?P<rate>{_NUMBER})\s+(?P<avg>{_NUMBER})\s+(?P<min>{_NUMBER})"
    rf"\s+(?P<max>{_NUMBER})"
)
_STREAM_SIZE = re.compile(r"^Array size = (?P<n>\d+)")
_STREAM_THREADS = re.compile(r"^Number of Threads counted = (?P<n>\d+)")


@dataclass
class _StreamRun:
    first: int
    rates: dict[str, Figure] = field(default_factory=dict)
    params: dict[str, int] = field(default_factory=dict)
    failed: str | None = None
    last: int = 0


class StreamReader(LineReader):
    format = "stream"

    def __init__(self) -> None:
        super().__init__()
        self.current: _StreamRun | None = None
        self.params: dict[str, int] = {}

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        if text.startswith("STREAM version"):
            self.flush()
            self.params = {}
            return
        for pattern, key in ((_STREAM_SIZE, "array_size"), (_STREAM_THREADS, "threads")):
            match = pattern.match(text)
            if match:
                self.params[key] = bounded_int(match["n"], what=key, line=number, high=2**63 - 1)
                return
        if text.startswith("Function") and "Rate" in text:
            self.flush()
            self.current = _StreamRun(number, params=dict(self.params))
            return
        if self.current is None:
            return
        match = _STREAM_ROW.match(text)
        if match:
            kernel = match["kernel"].lower()
            rate = finite(match["rate"], what=f"{match['kernel']} rate", line=number)
            self.current.rates[kernel] = Figure(kernel, rate, "MB/s", True, number)
            self.current.last = number
            return
        if text.startswith("Failed Validation"):
            self.current.failed = self.current.failed or text
            self.current.last = number
        elif text.startswith("Solution Validates"):
            self.current.last = number
            self.flush()

    def flush(self) -> None:
        run = self.current
        if run is None:
            return
        self.current = None
        if "triad" not in run.rates:
            raise LineError(run.last or run.first, "STREAM table without its 'Triad:' row")
        order = ["triad", *(k for k in ("copy", "scale", "add") if k in run.rates)]
        self.runs.append(
            ProgramRun(
                figures=tuple(run.rates[k] for k in order),
                params=run.params,
                valid=run.failed is None,
                reason=None if run.failed is None else f"STREAM: {run.failed}",
                first_line=run.first,
                last_line=run.last,
                threads=run.params.get("threads"),
            )
        )

    def expected(self) -> str:
        return "no STREAM result table (expected 'Function    Best Rate MB/s ...' then 'Triad:' rows)"


def detect_stream(lines: Sequence[str]) -> bool:
    return any(line.startswith("STREAM version") for line in lines) or any(
        line.startswith("Function    Best Rate MB/s") for line in lines
    )


# --- NAS Parallel Benchmarks ---------------------------------------------------------------------------
_NPB_DONE = re.compile(r"^(?P<name>[A-Z][A-Z0-9-]*) Benchmark Completed\.?$")
_NPB_FIELD = re.compile(r"^(?P<key>[A-Za-z][A-Za-z /]*?)\s*=\s*(?P<value>.*?)\s*$")


class NpbReader(LineReader):
    format = "npb"

    def __init__(self) -> None:
        super().__init__()
        self.block: dict[str, tuple[str, int]] | None = None
        self.name = ""
        self.first = 0

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        match = _NPB_DONE.match(text)
        if match:
            self.flush()
            self.block, self.name, self.first = {}, match["name"], number
            return
        if self.block is None:
            return
        match = _NPB_FIELD.match(text)
        if match:
            self.block[match["key"].strip().lower()] = (match["value"], number)
            return
        if text.startswith("Compile options") or (not text and "verification" in self.block):
            self.flush()

    def flush(self) -> None:
        block, self.block = self.block, None
        if block is None:
            return
        if "mop/s total" not in block:
            raise LineError(self.first, f"NPB {self.name} result block without its 'Mop/s total' line")
        mops_text, mops_line = block["mop/s total"]
        figures = [
            Figure(
                "mops_total", finite(mops_text, what="Mop/s total", line=mops_line), "Mop/s", True, mops_line
            )
        ]
        seconds = None
        if "time in seconds" in block:
            text, line = block["time in seconds"]
            seconds = finite(text, what="Time in seconds", line=line)
            figures.append(Figure("time", seconds, "s", False, line))
        params: dict[str, str | int] = {"benchmark": self.name.lower()}
        if "class" in block:
            params["class"] = block["class"][0]
        if "size" in block:
            params["size"] = re.sub(r"\s+", "", block["size"][0])
        threads = None
        for key in ("total threads", "total processes", "threads"):
            if key in block:
                threads = bounded_int(block[key][0], what=key, line=block[key][1], low=1)
                params["procs" if "process" in key else "threads"] = threads
                break
        verification = block.get("verification", ("", 0))[0].upper()
        valid = verification != "UNSUCCESSFUL"
        self.runs.append(
            ProgramRun(
                figures=tuple(figures),
                params=params,
                valid=valid,
                reason=None if valid else f"NPB {self.name}: Verification = UNSUCCESSFUL",
                first_line=self.first,
                last_line=max(line for _, line in block.values()),
                seconds=seconds,
                threads=threads,
                details={"verification": verification or None},
            )
        )

    def expected(self) -> str:
        return "no NPB result block (expected 'XX Benchmark Completed.' and 'Mop/s total = ...')"


def detect_npb(lines: Sequence[str]) -> bool:
    return any("NAS Parallel Benchmarks" in line or _NPB_DONE.match(line.strip()) for line in lines)


# --- OSU micro-benchmarks ------------------------------------------------------------------------------
_OSU_TITLE = re.compile(r"^# OSU (?P<title>.+?) Test(?: v(?P<version>[\d.]+))?\s*$")
_OSU_ROW = re.compile(rf"^(?P<size>\d+)\s+(?P<values>{_NUMBER}(?:\s+{_NUMBER})*)\s*$")
_OSU_COLUMN = re.compile(r"(?P<name>[A-Za-z][A-Za-z ./-]*?)\s*\((?P<unit>[^)]+)\)")


def _osu_figure(column: str, unit: str) -> tuple[str, bool]:
    name = re.sub(r"[^a-z0-9]+", "_", column.lower()).strip("_") or "value"
    lower = "latency" in name or unit in ("us", "ms", "s")
    return name, not lower


class OsuReader(LineReader):
    format = "osu"

    def __init__(self) -> None:
        super().__init__()
        self.test = ""
        self.columns: list[tuple[str, str, bool]] = []  # (name, unit, higher is better)

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        match = _OSU_TITLE.match(text)
        if match:
            self.test = re.sub(r"[^a-z0-9]+", "_", match["title"].lower().removeprefix("mpi ")).strip("_")
            self.columns = []
            return
        if text.startswith("# Size") and self.test:
            columns = []
            for m in _OSU_COLUMN.finditer(text[len("# Size") :]):
                unit = m["unit"].strip()
                name, higher = _osu_figure(m["name"], unit)
                columns.append((name, unit, higher))
            self.columns = columns
            if not self.columns:
                raise LineError(number, f"OSU header without a 'NAME (UNIT)' column: {text[:80]!r}")
            return
        if not self.columns:
            return
        match = _OSU_ROW.match(text)
        if match is None:
            return
        values = match["values"].split()
        if len(values) < len(self.columns):
            raise LineError(number, f"OSU row with {len(values)} values, expected {len(self.columns)}")
        size = bounded_int(match["size"], what="size", line=number, high=2**63 - 1)
        figures = tuple(
            Figure(name, finite(v, what=name, line=number), unit, higher, number)
            for (name, unit, higher), v in zip(self.columns, values, strict=False)
        )
        self.runs.append(
            ProgramRun(
                figures=figures, params={"test": self.test, "size": size}, first_line=number, last_line=number
            )
        )

    def expected(self) -> str:
        return (
            "no OSU result rows (expected '# OSU MPI ... Test', '# Size  Latency (us)', then SIZE VALUE rows)"
        )


def detect_osu(lines: Sequence[str]) -> bool:
    return any(_OSU_TITLE.match(line.strip()) for line in lines)
