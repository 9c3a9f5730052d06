"""Event sets: plain-text files of events and derived-metric formulas (LIKWID-group style).

A set file has sections, each started by a line holding only its name:

    SHORT   one line saying what the set is for
    EVENTS  `NAME  EVENT  [per=cpu|socket|unit|node] [optional]` per line
    METRICS `NAME = FORMULA` per line, a formula over event names and `time` (seconds of the interval)
    LONG    free text: each formula restated in words

`#` starts a comment. EVENT is any string the native counter library resolves (native/counters/ts_evsel.h:
perf syntax `pmu/event=0x..,umask=0x../`, the seeds' PERFEVTSEL form `pmu@0x004101a3`, `r01c2`, generic
names like `task-clock`, libpfm4 names) or one read from files: `proc:stat:FIELD` (per CPU, USER_HZ ticks),
`proc:interrupts` (per CPU), `proc:vmstat:KEY` (a trailing `*` takes every key with that prefix),
`sysfs:cpufreq:scaling_cur_freq` (per CPU, kHz), `sysfs:thermal:temp` (per zone, m°C) and
`rusage:nvcsw|nivcsw|minflt|majflt|utime|stime` (getrusage of each probe thread).

Sets are found by name in $TAILSCOPE_EVENTSETS (':'-separated directories), ~/.config/tailscope/eventsets,
then the shipped `tailscope/counters/sets/`; an argument naming an existing file is used as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tailscope.counters.derived import FormulaError, check_formula
from tailscope.errors import InputError

SECTIONS = ("SHORT", "EVENTS", "METRICS", "LONG")
PER_VALUES = ("cpu", "socket", "unit", "node")
FILE_PREFIXES = ("proc:", "sysfs:", "rusage:")
PROC_STAT_FIELDS = (
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
)
RUSAGE_FIELDS = ("nvcsw", "nivcsw", "minflt", "majflt", "utime", "stime")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PERF_SYNTAX = re.compile(r"^[A-Za-z0-9_.-]+/[^/\s]*/(:[uk]+)?$")
_PERFEVTSEL = re.compile(r"^([A-Za-z0-9_]+@)?0[xX][0-9a-fA-F]{1,16}$")


class EventSetError(InputError, ValueError):
    """A set file or name that cannot be used; the message names file:line and what was expected."""


@dataclass(frozen=True)
class SetEvent:
    name: str
    spec: str
    per: str | None
    optional: bool
    line: int

    @property
    def source(self) -> str:
        """perf (perf_event_open), proc / sysfs (read from files), rusage (getrusage)."""
        for prefix in FILE_PREFIXES:
            if self.spec.startswith(prefix):
                return prefix[:-1]
        return "perf"


@dataclass(frozen=True)
class Metric:
    name: str
    formula: str
    line: int


@dataclass
class EventSet:
    name: str
    path: Path
    short: str = ""
    events: list[SetEvent] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    long: str = ""

    def by_source(self, source: str) -> list[SetEvent]:
        return [e for e in self.events if e.source == source]


def builtin_dir() -> Path:
    return Path(str(resources.files("tailscope.counters") / "sets"))


def search_dirs() -> list[Path]:
    dirs = [Path(d) for d in os.environ.get("TAILSCOPE_EVENTSETS", "").split(":") if d]
    dirs.append(Path.home() / ".config" / "tailscope" / "eventsets")
    dirs.append(builtin_dir())
    return dirs


def available() -> dict[str, Path]:
    """Every set name that resolves, first directory wins."""
    out: dict[str, Path] = {}
    for d in search_dirs():
        if d.is_dir():
            for f in sorted(d.glob("*.txt")):
                out.setdefault(f.stem, f)
    return out


def find(name_or_path: str) -> Path:
    """The file of a set: an existing path, else NAME(.txt) in the search directories."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    stem = name_or_path.removesuffix(".txt")
    if "/" not in stem and stem:
        for d in search_dirs():
            candidate = d / f"{stem}.txt"
            if candidate.is_file():
                return candidate
    known = ", ".join(available()) or "none"
    raise EventSetError(
        f"--events {name_or_path}: no such file and no set of that name (sets: {known}; searched "
        f"{', '.join(str(d) for d in search_dirs())})"
    )


def check_event_string(spec: str) -> str | None:
    """Why `spec` is not an event string tailscope accepts, or None (syntax only: resolving needs the PMU)."""
    if any(c.isspace() for c in spec):
        return "an event string has no spaces"
    if spec.startswith("proc:"):
        parts = spec.split(":")
        if parts[1:2] == ["stat"] and len(parts) == 3 and parts[2] in PROC_STAT_FIELDS:
            return None
        if parts[1:] == ["interrupts"]:
            return None
        if parts[1:2] == ["vmstat"] and len(parts) == 3 and re.fullmatch(r"[a-z0-9_]+\*?", parts[2]):
            return None
        fields = "|".join(PROC_STAT_FIELDS)
        return f"expected proc:stat:FIELD ({fields}), proc:interrupts or proc:vmstat:KEY[*]"
    if spec.startswith("sysfs:"):
        if spec in ("sysfs:cpufreq:scaling_cur_freq", "sysfs:thermal:temp"):
            return None
        return "expected sysfs:cpufreq:scaling_cur_freq or sysfs:thermal:temp"
    if spec.startswith("rusage:"):
        if spec.split(":", 1)[1] in RUSAGE_FIELDS:
            return None
        return "expected rusage:" + "|".join(RUSAGE_FIELDS)
    if "/" in spec and not _PERF_SYNTAX.match(spec):
        return "perf syntax is PMU/term=value,.../ (e.g. uncore_cha/event=0x34,umask=0x11/)"
    if "@" in spec and not _PERFEVTSEL.match(spec):
        return "the PERFEVTSEL form is PMU@0xHEX (e.g. uncore_cha@0x0040013d)"
    return None


def parse(text: str, path: Path, name: str | None = None) -> EventSet:
    """Parse a set file's text; EventSetError names path:line."""
    es = EventSet(name=name or path.stem, path=path)
    section: str | None = None
    short: list[str] = []
    long: list[str] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{path}:{lineno}"
        line = raw.split("#", 1)[0].strip() if section != "LONG" else raw.rstrip()
        if line.strip() in SECTIONS:
            section = line.strip()
            continue
        if line.startswith("SHORT ") and section in (None, "SHORT"):  # LIKWID's one-line form
            section = "SHORT"
            line = line[6:]
        if section == "LONG":
            long.append(line)
            continue
        if not line:
            continue
        if section is None:
            raise EventSetError(f"{where}: expected a section line (SHORT, EVENTS, METRICS or LONG) first")
        if section == "SHORT":
            short.append(line)
        elif section == "EVENTS":
            tokens = line.split()
            if len(tokens) < 2:
                raise EventSetError(f"{where}: expected NAME EVENT [per=cpu|socket|unit|node] [optional]")
            ev_name, spec, rest = tokens[0], tokens[1], tokens[2:]
            if not _NAME.match(ev_name):
                raise EventSetError(f"{where}: {ev_name}: a counter name is letters, digits and _")
            if ev_name in seen:
                raise EventSetError(f"{where}: {ev_name} is already defined on line {seen[ev_name]}")
            why = check_event_string(spec)
            if why:
                raise EventSetError(f"{where}: {spec}: {why}")
            per, optional = None, False
            for tok in rest:
                if tok.startswith("per=") and tok[4:] in PER_VALUES:
                    per = tok[4:]
                elif tok == "optional":
                    optional = True
                else:
                    raise EventSetError(f"{where}: {tok}: expected per=cpu|socket|unit|node or optional")
            seen[ev_name] = lineno
            es.events.append(SetEvent(ev_name, spec, per, optional, lineno))
        elif section == "METRICS":
            if "=" not in line:
                raise EventSetError(f"{where}: expected NAME = FORMULA")
            m_name, formula = (s.strip() for s in line.split("=", 1))
            if not _NAME.match(m_name):
                raise EventSetError(f"{where}: {m_name}: a metric name is letters, digits and _")
            try:
                check_formula(formula, [e.name for e in es.events] + ["time"])
            except FormulaError as exc:
                raise EventSetError(f"{where}: {exc}") from None
            es.metrics.append(Metric(m_name, formula, lineno))
    es.short = " ".join(short)
    es.long = "\n".join(long).strip()
    if not es.events:
        raise EventSetError(f"{path}: no EVENTS section with events")
    return es


def load(name_or_path: str) -> EventSet:
    path = find(name_or_path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise EventSetError(f"{path}: cannot read: {exc}") from None
    return parse(text, path, name=path.stem)


# The shipped set that measures each part (node/parts.py ids: one place knows which CPU is which part); a part
# not here has no shipped hardware set yet (its PMU events were not checked against this project's sets).
SHIPPED_FOR_PART = {
    "skylake-sp": "skx",
    "icelake-sp": "icx",
    "sapphire-rapids": "spr",
    "emerald-rapids": "spr",
    "zen3": "zen",
    "zen4": "zen",
    "kunpeng920": "kp920",
    "neoverse-v2": "armv8",
}


def for_part(part_id: str | None) -> str | None:
    """The shipped hardware set for a part (node/parts.py id), or None."""
    return SHIPPED_FOR_PART.get(part_id or "")


def for_node(facts: Mapping[str, Any]) -> tuple[str, str]:
    """(the set to use on a node, why) from its facts (cpu_part_id, cpu_part, core_pmu): its part's shipped
    set where the kernel shows a core PMU, else the software set (no PMU: most virtual machines)."""
    shipped = for_part(facts.get("cpu_part_id"))
    part = facts.get("cpu_part") or "this CPU"
    if not facts.get("core_pmu"):
        needs = f"; the {shipped} set needs one" if shipped else ""
        return "software", f"no core PMU here (no hardware counters){needs}"
    if shipped is None:
        return "software", f"no shipped hardware set for {part}"
    return shipped, f"the shipped set for {part} (core PMU {facts['core_pmu']})"

