"""The campaign store's one schema: every table, column, type and unit in one registry.

Every writer (the local runner, the Slurm backend, every importer) and every reader (DuckDB views,
analysis, report) takes column names and types from here; nothing else declares a column.

# Schema version history (SCHEMA_VERSION)
# 1 - 2026-11: runs, iterations, pages, nodes, counters, samples.
# 2 - 2026-11: commit records (DIR/commits/): only shards a commit names are visible; page checksums.
#     New optional tables in the same version (a campaign without their shards reads them as empty):
#     corunners (per-trial evidence), regions, placement, traffic (tailscope trace), injections,
#     validation (tailscope validate).
#     corunners added (optional table: a campaign without its shards reads it as empty).
#     regions.process, touched_bytes, outlined, outlined_file, outlined_line added (nullable: older shards
#     read them as null).
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
        Column("source", pa.string(), doc="perf | proc | os (trial evidence) | imported:<format> | monitor"),
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

# --- `tailscope validate` (issue 14): the injection schedule and its scores. New tables in version 2's
# wave: a campaign without them reads them as empty.
INJECTIONS = Table(
    "injections",
    (
        Column("campaign", pa.string()),
        Column("node", pa.string()),
        Column("task", pa.string(), doc="the validate invocation that injected"),
        Column("block", pa.int32(), doc="schedule block index, from 0"),
        Column("variant", pa.string(), doc="the variant whose trials ran under the injection"),
        Column("trial_first", pa.int32(), doc="first trial index under the injection"),
        Column("trial_last", pa.int32(), doc="last trial index under the injection (inclusive)"),
        Column("kind", pa.string(), doc="injector (tailscope.inject.kinds): cpuoccupy, os-noise, ..."),
        Column("intensity", pa.float64(), doc="intensity in the kind's unit (inject/kinds.py)"),
        Column("cpus", pa.string(), nullable=True, doc="CPUs acted on (kernel list), null for memory kinds"),
        Column("expected_cause", pa.string(), doc="the cause tailscope should name"),
        Column("seed", pa.int64(), doc="the schedule's random seed"),
        Column("started_at", _TS, doc="injection in force (after the injector said ready)"),
        Column("ended_at", _TS, nullable=True, doc="injection stopped and cleaned up"),
        Column("details", pa.string(), nullable=True, doc="the injector's ready and done records as JSON"),
    ),
    key=("campaign", "task", "block"),
    doc="the recorded injection schedule of `tailscope validate` (trials outside every row were clean)",
)

VALIDATION = Table(
    "validation",
    (
        Column("campaign", pa.string()),
        Column("task", pa.string()),
        Column("scored_at", _TS),
        Column(
            "measure",
            pa.string(),
            doc="recall | false_positive_rate | placebo_rate | placebo_rate_flag | unbacked_flag_rate | "
            "top1 | top2 | confusion | *_quiet (score.py)",
        ),
        Column("kind", pa.string(), nullable=True, doc="injector (recall); null for all intensities / clean"),
        Column("intensity", pa.float64(), nullable=True, doc="recall per intensity; null: all of the kind"),
        Column("expected_cause", pa.string(), nullable=True, doc="top1/top2/confusion: the injected cause"),
        Column("predicted_cause", pa.string(), nullable=True, doc="confusion: tailscope's top cause or none"),
        Column("successes", pa.int64(), doc="runs counted as right (confusion: runs in the cell)"),
        Column("trials", pa.int64(), doc="runs scored"),
        Column("rate", pa.float64(), nullable=True, doc="successes / trials"),
        Column("ci_low", pa.float64(), nullable=True, doc="Clopper-Pearson lower bound"),
        Column("ci_high", pa.float64(), nullable=True, doc="Clopper-Pearson upper bound"),
        Column("confidence", pa.float64(), doc="coverage of the interval"),
    ),
    key=("campaign", "task", "measure", "kind", "intensity", "expected_cause", "predicted_cause"),
    doc="scores of `tailscope validate`: detection recall, false positives, cause accuracy, confusion matrix",
)

# --- `tailscope trace` (OMPT tool, seed 004). One trace is one `runs` row (probe "trace:<program>", source
# "ompt", metric "wall"); these child tables hang off its run_id. New tables in version 2's wave: a campaign
# without them reads them as empty.
REGIONS = Table(
    "regions",
    (
        Column("run_id", pa.string()),
        Column("thread", pa.int32(), doc="OpenMP thread, numbered by the tool in order of first event"),
        Column("kind", pa.string(), doc="parallel | implicit_task | work | sync (the OMPT callback)"),
        Column("construct", pa.string(), doc="parallel, implicit_task, loop, single, barrier_implicit, ..."),
        Column("parallel", pa.int64(), doc="the tool's id of the enclosing parallel region instance, from 1"),
        Column("depth", pa.int32(), doc="nesting depth on the thread, 0 outermost"),
        Column("object", pa.string(), nullable=True, doc="loaded object holding codeptr_ra (dladdr)"),
        Column("offset", pa.int64(), nullable=True, unit="B", doc="codeptr_ra - object base; null: none"),
        Column("function", pa.string(), nullable=True, doc="addr2line of offset - 1"),
        Column("file", pa.string(), nullable=True),
        Column("line", pa.int32(), nullable=True),
        Column("tsc_begin", pa.int64(), unit="cycles"),
        Column("tsc_end", pa.int64(), unit="cycles"),
        Column("mono_begin_ns", pa.int64(), unit="ns", doc="CLOCK_MONOTONIC from the tool's TSC anchors"),
        Column("mono_end_ns", pa.int64(), unit="ns"),
        Column("seconds", pa.float64(), unit="s"),
        Column("cpu_begin", pa.int32(), doc="CPU at entry (RDTSCP TSC_AUX)"),
        Column("cpu_end", pa.int32(), doc="CPU at exit"),
        Column("socket", pa.int32(), doc="socket of cpu_begin (-1 unknown)"),
        Column("numa_node", pa.int32(), doc="NUMA node of cpu_begin (-1 unknown)"),
        Column("team_size", pa.int32(), nullable=True, doc="parallel: requested; implicit_task: actual"),
        Column("thread_num", pa.int32(), nullable=True, doc="implicit_task: omp_get_thread_num()"),
        Column("iterations", pa.int64(), nullable=True, doc="work: the count OMPT reports"),
        Column("end_inferred", pa.bool_(), doc="no end from the runtime (gcc `single`): ends at its barrier"),
        Column("counters", pa.string(), nullable=True, doc="counter deltas, JSON {event: delta}"),
        Column("process", pa.int32(), nullable=True, doc="pid: the traced program or a process it forked"),
        Column("outlined", pa.string(), nullable=True, doc="parallel, implicit_task: the outlined function"),
        Column("outlined_file", pa.string(), nullable=True),
        Column("outlined_line", pa.int32(), nullable=True, doc="its first line, or its first construct's"),
        Column(
            "touched_bytes",
            pa.int64(),
            nullable=True,
            unit="B",
            doc="parallel: anonymous pages the process referenced while it ran (null: not measured)",
        ),
    ),
    key=("run_id", "thread", "tsc_begin", "depth"),
    doc="one row per OpenMP construct instance per thread (tailscope trace)",
)

PLACEMENT = Table(
    "placement",
    (
        Column("run_id", pa.string()),
        Column("snapshot", pa.int32(), doc="numa_maps copy number"),
        Column("parallel", pa.int64(), doc="parallel region instance it was taken after (0: at exit)"),
        Column("tsc", pa.int64(), unit="cycles"),
        Column("numa_node", pa.int32()),
        Column("socket", pa.int32(), doc="socket of the node's CPUs (-1: memory-only node)"),
        Column("bytes", pa.int64(), unit="B", doc="the program's anonymous data on that node"),
        Column("mappings", pa.int32(), doc="anonymous mappings with resident pages"),
    ),
    key=("run_id", "snapshot", "numa_node"),
    doc="where the traced program's data lived (/proc/PID/numa_maps at region boundaries)",
)

TRAFFIC = Table(
    "traffic",
    (
        Column("run_id", pa.string()),
        Column("parallel", pa.int64(), doc="parallel region instance"),
        Column("src_socket", pa.int32(), doc="socket the bytes came from (-1: link peer unknown)"),
        Column("dst_socket", pa.int32(), doc="socket whose threads (or link receiver) took them"),
        Column("bytes", pa.float64(), unit="B"),
        Column("seconds", pa.float64(), unit="s", doc="the region's duration"),
        Column("source", pa.string(), doc="placement-model | uncore"),
        Column("event", pa.string(), nullable=True, doc="uncore event counted (null for placement-model)"),
        Column("link", pa.string(), nullable=True, doc="uncore link unit, e.g. uncore_upi_0"),
    ),
    key=("run_id", "parallel", "source", "event", "link", "src_socket", "dst_socket"),
    doc="bytes between sockets per parallel region instance; `source` says whether measured or modelled",
)

CORUNNERS = Table(
    "corunners",
    (
        Column("run_id", pa.string()),
        Column("pid", pa.int64(), doc="process id"),
        Column("comm", pa.string(), doc="/proc/PID/comm (the process name)"),
        Column("cmdline", pa.string(), nullable=True, doc="first 200 characters of the command line"),
        Column("cpu_s", pa.float64(), unit="s", doc="CPU time it used on the probe's CPUs during the trial"),
        Column("share", pa.float64(), doc="cpu_s / (trial wall_s x number of probe CPUs)"),
    ),
    key=("run_id", "pid"),
    doc="processes other than the probe and the runner that ran on the probe's CPUs during a trial "
    "(tailscope.evidence; at most 10 per trial, share >= 1%; optional: campaigns without it read as empty)",
)

# The history store (tailscope.history): a directory in this same format, one entry per (campaign, node,
# probe variant). Optional tables: a campaign has no shards of them and reads them as empty.
HISTORY_ENTRIES = Table(
    "history_entries",
    (
        Column("campaign", pa.string(), doc="campaign id of the campaign summarised"),
        Column("campaign_name", pa.string(), nullable=True),
        Column("node", pa.string()),
        Column("probe", pa.string()),
        Column("variant", pa.string()),
        Column("metric", pa.string()),
        Column("unit", pa.string()),
        Column("higher_is_better", pa.bool_()),
        Column("started_at", _TS, doc="first trial of (node, variant) in the campaign"),
        Column("ended_at", _TS, doc="last trial of (node, variant) in the campaign"),
        Column("n", pa.int32(), doc="ok trials summarised"),
        Column("n_failed", pa.int32()),
        Column("median", pa.float64()),
        Column("median_lower", pa.float64(), nullable=True, doc="CI of the median (null: n too small)"),
        Column("median_upper", pa.float64(), nullable=True),
        Column("slow_rate", pa.float64(), doc="share of runs slow at the primary threshold"),
        Column("verdict", pa.string(), doc="the node's verdict in that campaign"),
        Column("causes", pa.string(), doc="causes of the flagged runs, counted, as JSON"),
        Column("facts_digest", pa.string(), doc="the node facts of the campaign: key into history_facts"),
        Column("added_at", _TS, doc="when this version of the entry was written (the latest wins)"),
    ),
    key=("campaign", "node", "variant"),
    doc="one campaign's summary of one (node, probe variant)",
)

HISTORY_FACTS = Table(
    "history_facts",
    (
        Column("node", pa.string()),
        Column("digest", pa.string(), doc="sha256 of the facts JSON"),
        Column("collected_at", _TS),
        Column("facts", pa.string(), doc="the node facts (nodes.facts), as JSON with sorted keys"),
    ),
    key=("node", "digest"),
    doc="every distinct set of facts a node had, stored once",
)

HISTORY_NOTES = Table(
    "history_notes",
    (
        Column("node", pa.string()),
        Column("at", _TS, doc="when the maintenance happened"),
        Column("text", pa.string()),
        Column("added_at", _TS),
    ),
    key=("node", "at", "text"),
    doc="maintenance events (`history note`)",
)

HISTORY_EXCLUSIONS = Table(
    "history_exclusions",
    (
        Column("campaign", pa.string()),
        Column("node", pa.string()),
        Column("variant", pa.string(), doc="'*': every variant of the node in that campaign"),
        Column("excluded", pa.bool_(), doc="false: taken back (the latest row wins)"),
        Column("reason", pa.string()),
        Column("added_at", _TS),
    ),
    key=("campaign", "node", "variant"),
    doc="entries taken out of the judgement (`history exclude`), visibly",
)

# The site's own jobs (tailscope.jobs), in the same history: Slurm accounting records and the per-job epilog's
# evidence. Optional tables, like the history's.
JOBS = Table(
    "jobs",
    (
        Column("cluster", pa.string(), doc="Slurm cluster name ('' when the records did not say)"),
        Column("job_id", pa.string(), doc="sacct JobID of the allocation (array jobs: 123_4)"),
        Column("name", pa.string(), doc="JobName"),
        Column("user_name", pa.string(), doc="User (`user` is a word SQL keeps for itself)"),
        Column("account", pa.string(), nullable=True, doc="Account (empty: no association)"),
        Column("partition", pa.string(), doc="Partition"),
        Column("nodelist", pa.string(), doc="NodeList, Slurm's hostlist syntax ('' when none was assigned)"),
        Column("nnodes", pa.int32(), doc="NNodes"),
        Column("cpus", pa.int32(), doc="AllocCPUS (NCPUS) of the whole allocation"),
        Column("submit_at", _TS, nullable=True, doc="Submit"),
        Column("start_at", _TS, nullable=True, doc="Start (null: never started)"),
        Column("end_at", _TS, doc="End"),
        Column("elapsed_s", pa.float64(), unit="s", doc="ElapsedRaw: the job's (last run's) wall time"),
        Column("state", pa.string(), doc="State's first word: COMPLETED, FAILED, CANCELLED, TIMEOUT, ..."),
        Column("exit_code", pa.string(), nullable=True, doc="ExitCode, code:signal"),
        Column("comment", pa.string(), nullable=True, doc="Comment (a `tailscope:NAME` tag names the class)"),
        Column("source", pa.string(), doc="sacct | sacct-file:NAME"),
        Column("added_at", _TS, doc="when this version of the record was written (the latest wins)"),
    ),
    key=("cluster", "job_id"),
    doc="one finished Slurm job (its last run when requeued), from `tailscope jobs collect`",
)

JOB_EVIDENCE = Table(
    "job_evidence",
    (
        Column("cluster", pa.string(), doc="Slurm cluster name ('' when the epilog did not know it)"),
        Column("job_id", pa.string()),
        Column("node", pa.string()),
        Column("at", _TS, doc="when the epilog ran"),
        Column("facts_digest", pa.string(), doc="the node facts' digest at the job's end ('' unknown)"),
        Column("record", pa.string(), doc="the whole epilog record as JSON (tailscope.jobs.record)"),
        Column("added_at", _TS),
    ),
    key=("cluster", "job_id", "node"),
    doc="what a node showed while a job ran on it: `tailscope jobs epilog`, one record per job and node",
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        RUNS,
        ITERATIONS,
        PAGES,
        NODES,
        COUNTERS,
        SAMPLES,
        CORUNNERS,
        REGIONS,
        PLACEMENT,
        TRAFFIC,
        INJECTIONS,
        VALIDATION,
        HISTORY_ENTRIES,
        HISTORY_FACTS,
        HISTORY_NOTES,
        HISTORY_EXCLUSIONS,
        JOBS,
        JOB_EVIDENCE,
    )
}

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
