"""The campaign store's one schema: every table, column, type and unit in one registry.

Every writer (the local runner, the Slurm backend, every importer) and every reader (DuckDB views,
analysis, report) takes column names and types from here; nothing else declares a column.

# Schema version history (SCHEMA_VERSION)
# 1 - 2026-11: runs, iterations, pages, nodes, counters, samples.
# 2 - 2026-11: commit records (DIR/commits/): only shards a commit names are visible; page checksums.
Older versions keep loading once a version 2 exists; an unknown version is refused by name
(see `check_schema_version`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tailscope.errors import InputError

SCHEMA_VERSION = 2
SUPPORTED_SCHEMA_VERSIONS = frozenset({1, 2})


@dataclass(frozen=True)
class Column:
    """One column of one table: its Arrow type, whether it may be null, its unit and meaning."""

    name: str
    type: pa.DataType
    nullable: bool = False
    unit: str = ""
    doc: str = ""

    def field(self) -> pa.Field:
        return pa.field(self.name, self.type, nullable=self.nullable)


@dataclass(frozen=True)
class Table:
    """A table of the store: its columns and the key that identifies one row."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    doc: str = ""

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([c.field() for c in self.columns])

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name} has no column {name!r}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]


_TS = pa.timestamp("us", tz="UTC")

RUNS = Table(
    "runs",
    (
        Column("run_id", pa.string(), doc="hash of (campaign, node, variant, trial): stable across resumes"),
        Column("campaign", pa.string(), doc="campaign id from campaign.json"),
        Column("node", pa.string(), doc="node name ($SLURMD_NODENAME under Slurm, else hostname)"),
        Column("probe", pa.string(), doc="probe name, or imported:<name> for imported results"),
        Column("variant", pa.string(), doc="probe name plus a hash of its sorted parameters"),
        Column("params", pa.string(), doc="the variant's parameters as JSON with sorted keys"),
        Column("trial", pa.int32(), doc="trial index within (node, variant), from 0"),
        Column("page_policy", pa.string(), nullable=True, doc="4k | thp | 2m | 1g"),
        Column("cpus", pa.string(), nullable=True, doc="CPUs the probe's threads ran on, thread order"),
        Column("threads", pa.int32(), nullable=True, doc="threads counted by the probe"),
        Column("started_at", _TS, doc="wall-clock time the trial's process started"),
        Column("wall_s", pa.float64(), nullable=True, unit="s", doc="process wall time"),
        Column("tsc_start", pa.int64(), nullable=True, unit="cycles", doc="TSC at timed-region start"),
        Column("tsc_end", pa.int64(), nullable=True, unit="cycles", doc="TSC at timed-region end"),
        Column("tsc_hz", pa.float64(), nullable=True, unit="Hz", doc="TSC frequency the probe used"),
        Column("mono_start_ns", pa.int64(), nullable=True, unit="ns", doc="CLOCK_MONOTONIC, start"),
        Column("mono_end_ns", pa.int64(), nullable=True, unit="ns", doc="CLOCK_MONOTONIC, end"),
        Column("realtime_start_ns", pa.int64(), nullable=True, unit="ns", doc="CLOCK_REALTIME, start"),
        Column("seconds", pa.float64(), nullable=True, unit="s", doc="timed region"),
        Column("metric", pa.string(), doc="name of the headline metric (bandwidth, gflops, ...)"),
        Column("value", pa.float64(), nullable=True, doc="headline metric value (null when failed)"),
        Column("unit", pa.string(), doc="unit of value"),
        Column("higher_is_better", pa.bool_(), doc="direction of value"),
        Column("status", pa.string(), doc="ok | failed | timeout | invalid"),
        Column("error", pa.string(), nullable=True, doc="one-line reason when status is not ok"),
        Column("source", pa.string(), doc="probe | import:<format>"),
        Column("task", pa.string(), doc="id of the writer process (runner invocation or Slurm step)"),
        Column("config", pa.string(), nullable=True, doc="the probe's config record as JSON"),
        Column("summary", pa.string(), nullable=True, doc="the probe's result summary as JSON"),
    ),
    key=("run_id",),
    doc="one row per trial",
)

ITERATIONS = Table(
    "iterations",
    (
        Column("run_id", pa.string()),
        Column("iteration", pa.int32(), doc="iteration index within the run, from 0"),
        Column("thread", pa.int32(), nullable=True, doc="thread index; null for the team record"),
        Column("kernel", pa.string(), nullable=True, doc="sub-kernel (stream: copy/scale/add/triad)"),
        Column("cpu", pa.int32(), nullable=True, doc="CPU the thread was on at the iteration's end"),
        Column("warmup", pa.bool_(), doc="warm-up iterations are kept but excluded from statistics"),
        Column("seconds", pa.float64(), nullable=True, unit="s"),
        Column("value", pa.float64(), doc="iteration metric in the run's unit"),
        Column("tsc_start", pa.int64(), nullable=True, unit="cycles"),
        Column("tsc_end", pa.int64(), nullable=True, unit="cycles"),
        Column("mono_start_ns", pa.int64(), nullable=True, unit="ns"),
        Column("mono_end_ns", pa.int64(), nullable=True, unit="ns"),
    ),
    key=("run_id", "iteration", "thread", "kernel"),
    doc="one row per timed iteration per thread (and per team where the probe has one)",
)

PAGES = Table(
    "pages",
    (
        Column("run_id", pa.string()),
        Column("array", pa.string(), doc="which allocation (a, b, c, data)"),
        Column("thread", pa.int32(), nullable=True, doc="thread whose chunk the page belongs to"),
        Column("virtual_address", pa.int64(), unit="B"),
        Column("physical_address", pa.int64(), nullable=True, unit="B", doc="null when not present"),
        Column("page_size", pa.int64(), unit="B"),
    ),
    key=("run_id", "array", "virtual_address"),
    doc="physical pages a trial used (when pagemap was readable)",
)

NODES = Table(
    "nodes",
    (
        Column("node", pa.string()),
        Column("collected_at", _TS),
        Column("task", pa.string()),
        Column("cpu_vendor", pa.string(), nullable=True),
        Column("cpu_model_name", pa.string(), nullable=True),
        Column("cpu_family", pa.int32(), nullable=True),
        Column("cpu_model", pa.int32(), nullable=True),
        Column("cpu_stepping", pa.int32(), nullable=True),
        Column("microcode", pa.string(), nullable=True),
        Column("sockets", pa.int32(), nullable=True),
        Column("cores", pa.int32(), nullable=True, doc="physical cores, all sockets"),
        Column("threads", pa.int32(), nullable=True, doc="logical CPUs online"),
        Column("numa_nodes", pa.int32(), nullable=True),
        Column("l1d_bytes", pa.int64(), nullable=True, unit="B", doc="per core"),
        Column("l2_bytes", pa.int64(), nullable=True, unit="B", doc="per core"),
        Column("l3_bytes", pa.int64(), nullable=True, unit="B", doc="per instance as reported"),
        Column("memory_bytes", pa.int64(), nullable=True, unit="B"),
        Column("kernel", pa.string(), nullable=True),
        Column("os", pa.string(), nullable=True),
        Column("thp_enabled", pa.string(), nullable=True),
        Column("thp_defrag", pa.string(), nullable=True),
        Column("hugepages_2m", pa.int64(), nullable=True, doc="reserved 2 MiB pages (all nodes)"),
        Column("hugepages_1g", pa.int64(), nullable=True, doc="reserved 1 GiB pages (all nodes)"),
        Column("governor", pa.string(), nullable=True),
        Column("turbo", pa.string(), nullable=True, doc="on | off | unknown"),
        Column("virtualization", pa.string(), nullable=True, doc="none or the hypervisor"),
        Column("facts", pa.string(), doc="every fact collected, as JSON (the columns above included)"),
    ),
    key=("node", "collected_at"),
    doc="node facts, one row per collection (the latest per node is current)",
)

COUNTERS = Table(
    "counters",
    (
        Column("run_id", pa.string()),
        Column("source", pa.string(), doc="perf | proc | imported:<format> | monitor"),
        Column("pmu", pa.string(), doc="cpu, uncore_cha, uncore_imc, software, proc, ..."),
        Column("unit", pa.int32(), nullable=True, doc="cpu / cha / imc / upi index"),
        Column("event", pa.string()),
        Column("value", pa.float64()),
        Column("time_enabled", pa.int64(), nullable=True, unit="ns"),
        Column("time_running", pa.int64(), nullable=True, unit="ns"),
        Column("width", pa.int32(), nullable=True, unit="bits"),
    ),
    key=("run_id", "source", "pmu", "unit", "event"),
    doc="counter deltas cut to each run",
)

SAMPLES = Table(
    "samples",
    (
        Column("node", pa.string()),
        Column("sample", pa.int64(), doc="sample number within the monitor session"),
        Column("t_ns", pa.int64(), unit="ns", doc="CLOCK_REALTIME"),
        Column("tsc", pa.int64(), nullable=True, unit="cycles"),
        Column("source", pa.string()),
        Column("pmu", pa.string()),
        Column("unit", pa.int32(), nullable=True),
        Column("event", pa.string()),
        Column("value", pa.float64(), doc="raw cumulative value as read"),
    ),
    key=("node", "source", "sample", "pmu", "unit", "event"),
    doc="background monitor samples",
)

TABLES: dict[str, Table] = {t.name: t for t in (RUNS, ITERATIONS, PAGES, NODES, COUNTERS, SAMPLES)}

RUN_STATUSES = ("ok", "failed", "timeout", "invalid")


class SchemaVersionError(InputError):
    """A campaign or shard written by a schema version this tailscope cannot read."""


def check_schema_version(version: object, where: str) -> int:
    """Return the version if this tailscope can read it, else raise naming it and where it was found."""
    if not isinstance(version, int) or version not in SUPPORTED_SCHEMA_VERSIONS:
        raise SchemaVersionError(
            f"{where}: schema version {version!r} is not supported by this tailscope "
            f"(it reads versions {sorted(SUPPORTED_SCHEMA_VERSIONS)}); upgrade tailscope"
        )
    return version
