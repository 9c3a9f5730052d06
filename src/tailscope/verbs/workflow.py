"""The verbs as library calls: each CLI verb calls exactly one function here.

Data flows one way: probes -> campaign runner -> store -> analysis -> report. This module only wires them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from tailscope.analysis.causes.page_placement import PagesTest, pages_tests, variants_it_explains
from tailscope.analysis.cluster import cluster_settings_of
from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.analysis.summary import ATTRIBUTION_RUN_COLUMNS, STORE_RUN_COLUMNS, analyze
from tailscope.campaign import STOPPING_RECORD
from tailscope.store.campaign import MANIFEST, Campaign, StoreError, atomic_files, new_task_id
from tailscope.store.read import CampaignConnection, connect

# The runner (probes, counters), the probe catalogue, the node's facts and the HTML report are imported by
# the verbs that use them: `analyze` loads none of them (the catalogue and the facts were 15 ms of its start).
if TYPE_CHECKING:
    from tailscope.campaign.runner import LocalRunner, RunOutcome, Trial
    from tailscope.campaign.stopping import SettledSchedule, StoppingRequest
    from tailscope.probes.catalogue import ProbeVariant


@dataclass(frozen=True)
class RunRequest:
    variants: tuple[tuple[ProbeVariant, int], ...]  # (variant, trials wanted for this request)
    campaign_dir: Path | None = None
    resume: bool = False
    node: str | None = None
    timeout_s: float | None = None
    show_progress: bool = True
    label: str = "run"
    monitor: bool = False  # run tsmon beside the trials and cut each trial's deltas from its samples
    monitor_interval_s: float = 1.0
    monitor_events: str | None = None  # the monitor's event set (default: the probe's --events, or software)
    evidence: bool = True  # per-trial evidence (tailscope.evidence): /proc, /sys, co-runners, clock
    before_trial: Callable[[Trial], None] | None = None  # hook before each trial (validate's injections)
    flush_trials: int = 50  # trials per commit (validate: one block, so a SIGKILL loses at most one block)
    # stop each variant when its verdict settles (campaign/stopping.py); the trials are then caps
    stopping: StoppingRequest | None = None


def _preflight_or_error(variant: ProbeVariant) -> dict[str, Any] | Exception:
    """campaign.runner.preflight's config, or what it raised (run_campaign raises it in variant order)."""
    from tailscope.campaign.runner import preflight

    try:
        return preflight(variant)
    except Exception as exc:
        return exc


def run_campaign(request: RunRequest) -> RunOutcome:
    """Check every variant's options with the probe, claim the trials to run, run them.

    Without --resume, `--trials N` runs N new trials of each variant on this node (after every trial stored
    or held by another writer); with it, the planned trials this node misses. Trial numbers are claimed under
    the campaign lock, so two `run`s into one campaign never run one trial twice.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tailscope.campaign.runner import LocalRunner, Trial, default_campaign_dir, interleave, preflight
    from tailscope.node.facts import node_name
    from tailscope.probes.catalogue import ProbeVariant
    from tailscope.probes.jobenv import job_notices
    from tailscope.store.load import claim_run_trials, remove_empty_campaign

    node = request.node or node_name()
    notices: list[str] = []
    # The probes' --check-args at once (a check's four: a tenth of a second less before its first trial,
    # more on a busy node); the first failure in the variants' order is raised, before anything is stored.
    probes = [variant for variant, _ in request.variants if isinstance(variant, ProbeVariant)]
    with ThreadPoolExecutor(max_workers=max(1, min(len(probes), 8))) as pool:
        configs = list(pool.map(_preflight_or_error, probes))
    checked = {v.variant_id: c for v, c in zip(probes, configs, strict=True)}
    for variant, _ in request.variants:
        if not isinstance(variant, ProbeVariant):  # an application (`run -- CMD`): app/variant.py checks it
            variant.preflight()
            notices += [n for n in variant.notices() if n not in notices]
            continue
        config = checked[variant.variant_id]
        if isinstance(config, BaseException):  # ProbeUsageError before anything is created or stored
            raise config
        notices += [n for n in job_notices(variant, config) if n not in notices]
    if request.campaign_dir is None:
        if request.resume:
            raise StoreError("--resume needs --campaign DIR (the campaign to continue)")
        root = default_campaign_dir(request.label, node)
    else:
        root = Path(request.campaign_dir)
    if request.resume or (root / MANIFEST).exists():
        campaign = Campaign.open(root)
    else:
        campaign = Campaign(root, Campaign.new_manifest(root))
    variants = [variant for variant, _ in request.variants]
    if request.resume and not request.variants:
        variants = [variant_from_plan(p.probe, p.params) for p in campaign.manifest.probe_plans()]
        for variant in variants:
            if isinstance(variant, ProbeVariant):
                preflight(variant)
            else:
                variant.preflight()
    planned = campaign.manifest.planned_trials()
    wanted: dict[str, list[int] | int] = {}
    for variant, trials in request.variants or [(v, 0) for v in variants]:
        have = planned.get(variant.variant_id, 0)
        if request.resume:
            wanted[variant.variant_id] = list(range(max(have, trials)))
        else:
            wanted[variant.variant_id] = trials
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    task = new_task_id()
    try:
        claim = claim_run_trials(campaign, node, key=task, wanted=wanted)
    except BaseException:
        if created:
            remove_empty_campaign(root)
        raise
    try:
        by_id = {v.variant_id: v for v in variants}
        # interleaved: compared variants alternate trial by trial, and the ETA sees every variant early
        trials = interleave([Trial(by_id[vid], t) for vid, ts in claim.trials.items() for t in ts])
        # a stopped campaign's plans grow with the trials it runs (runner._grow_plan), not with its caps
        plans = [
            by_id[vid].to_plan(max(planned.get(vid, 0), 0 if request.stopping or not ts else max(ts) + 1))
            for vid, ts in claim.trials.items()
        ]
        schedule = None
        if request.stopping is not None:
            from tailscope.campaign.stopping import SettledSchedule

            s = request.stopping
            schedule = SettledSchedule(trials, s.settings, s.baselines, budget_s=s.budget_s)
        runner = LocalRunner(
            campaign,
            node=node,
            task=task,
            timeout_s=request.timeout_s,
            show_progress=request.show_progress,
            plans=plans,
            evidence=request.evidence,
            before_trial=request.before_trial,
            flush_trials=request.flush_trials,
        )
        if request.monitor:
            outcome = _run_with_monitor(request, runner, trials, variants, schedule)
        else:
            outcome = runner.run(trials, schedule)
            if request.resume and (root / MANIFEST).exists():
                store_monitor_files(root, node)
        outcome.committed = runner.committed
        outcome.notices = notices
        if schedule is not None and request.stopping is not None:
            from tailscope.campaign.stopping import write_record

            outcome.stop = schedule.summary()
            if runner.committed:
                write_record(root, node, request.stopping, outcome.stop)
        return outcome
    finally:
        claim.release()
        if created and not (root / MANIFEST).exists():  # nothing stored: nothing of this run stays either
            from tailscope.app.trial import remove_trial_directories

            remove_trial_directories(root)
            remove_empty_campaign(root)


def variant_from_plan(probe: str, params: dict[str, Any]) -> Any:
    """The variant of a stored plan: a probe's, or an application's (`app:NAME`, app/variant.py)."""
    if probe.startswith("app:"):
        from tailscope.app.variant import AppVariant

        return AppVariant.from_plan(probe, params)
    from tailscope.probes.catalogue import ProbeVariant

    return ProbeVariant.from_plan(probe, params)


def _run_with_monitor(
    request: RunRequest,
    runner: LocalRunner,
    trials: list[Trial],
    variants: list[ProbeVariant],
    schedule: SettledSchedule | None = None,
) -> RunOutcome:
    """The trials with tsmon beside them; then its samples are stored and cut per trial (source monitor)."""
    from tailscope.counters import monitor

    events = request.monitor_events or next(
        (str(v.params["events"]) for v in variants if v.params.get("events")), "software"
    )
    root, node, task = runner.campaign.root, runner.node, runner.task
    path = monitor.monitor_file_for(root, node, task)
    with monitor.running_monitor(path, interval_s=request.monitor_interval_s, events=events):
        outcome = runner.run(trials, schedule)
    if runner.committed:
        store_monitor_files(root, node, own_task=task)
    return outcome


def store_monitor_files(root: Path, node: str, own_task: str | None = None) -> None:
    """Store the monitor files of this node not stored yet: this run's, and those of runs that were killed
    before they could (`run --resume` calls this too). Files of writers still running are left alone."""
    from tailscope.counters import monitor
    from tailscope.store.load import live_claims

    running = {c.key for c in live_claims(root)} - {own_task}
    for path in monitor.unstored_monitor_files(root, node):
        if path.name.split(".")[-3] not in running and not monitor.discard_if_empty(path):
            monitor.store_monitor_file(path, root, node=node, cut=True)


def load_frames(
    campaign: Campaign,
    *,
    probe: str | None = None,
    node: str | None = None,
    con: CampaignConnection | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs (every status) and the iterations of the selected runs (on `con` when given)."""
    own = con is None
    if con is None:
        con = connect(campaign)
    try:
        runs = con.runs(probe=probe, node=node)
        iterations = con.iterations_of_runs(probe=probe, node=node)
    finally:
        if own:
            con.close()
    return runs, iterations


def analyze_campaign(
    campaign_dir: Path,
    settings: Settings,
    *,
    probe: str | None = None,
    node: str | None = None,
    con: CampaignConnection | None = None,
) -> CampaignAnalysis:
    """The campaign's analysis (on `con` when given: a connection reads every shard once)."""
    campaign = Campaign.open(campaign_dir)
    own = con is None
    if con is None:
        con = connect(campaign)  # one connection: every shard footer is read once
    try:
        columns = STORE_RUN_COLUMNS
        if not con.campaign.shard_files("counters"):  # no counter attribution: not its columns (1/6 of reads)
            columns = tuple(c for c in columns if c not in ATTRIBUTION_RUN_COLUMNS)
        runs = con.runs(probe=probe, node=node, columns=columns)
        if runs.empty:
            raise StoreError(f"{campaign_dir}: no runs stored" + (f" for probe {probe}" if probe else ""))
        iterations = _iteration_source(con, probe, node)
        cluster = cluster_settings_of(campaign.manifest.cluster)
        counters, corunners, nodes = load_evidence(con, runs["run_id"].astype(str).tolist())
        evidence = {"counters": counters, "corunners": corunners, "nodes": nodes}
        stopping = None
        if (Path(campaign_dir) / STOPPING_RECORD).exists():  # a campaign `check` stopped when settled
            from tailscope.campaign.stopping import read_record

            stopping = read_record(Path(campaign_dir))
        analysis = analyze(
            runs, iterations, settings, campaign.campaign_id, cluster, **evidence, stopping=stopping
        )
        tests = pages_tests_for(campaign_dir, con, analysis)
        if tests:
            analysis = analyze(
                runs, iterations, settings, campaign.campaign_id, cluster, **evidence, pages_tests=tests,
                stopping=stopping,
            )
        return with_attribution(con, analysis, runs)
    finally:
        if own:
            con.close()


def _iteration_source(
    con: CampaignConnection, probe: str | None, node: str | None
) -> Callable[[Sequence[str] | None], pd.DataFrame]:
    """The analysis' IterationSource on `con`: only the iterations it asks for are read, a set once while
    it is held. Not held here: analyze drops its rows once its runs are classified, before it builds the
    results (the peak of `analyze` of 1,000 nodes), so a second analysis (the pages test) reads them again."""
    import weakref

    seen: weakref.WeakValueDictionary[tuple[str, ...] | None, pd.DataFrame] = weakref.WeakValueDictionary()

    def source(run_ids: Sequence[str] | None) -> pd.DataFrame:
        key = None if run_ids is None else tuple(run_ids)
        frame = seen.get(key)
        if frame is None:
            if run_ids is None:
                frame = con.iterations_of_runs(probe=probe, node=node)
            else:
                frame = con.iterations_of_runs(run_ids=run_ids)
            seen[key] = frame
        return frame

    return source


def analyze_and_report(campaign_dir: Path, settings: Settings, output: Path) -> tuple[CampaignAnalysis, Path]:
    """`report`: the analysis and its HTML from one store connection (connecting reads every shard)."""
    if not output.parent.is_dir():  # before the analysis, not after it
        raise StoreError(f"-o {output}: directory {output.parent} does not exist (create it first)")
    con = connect(Campaign.open(campaign_dir))
    try:
        analysis = analyze_campaign(campaign_dir, settings, con=con)
        return analysis, write_report(campaign_dir, analysis, output, con=con)
    finally:
        con.close()


def pages_tests_for(
    campaign_dir: Path, con: CampaignConnection, analysis: CampaignAnalysis
) -> dict[str, PagesTest]:
    """The pages test (addr explain's permutation test, no slice model) of the variants where a run's
    best explanation is page-placement and the campaign recorded pages; empty otherwise."""
    wanted = variants_it_explains(analysis.runs)
    if not wanted or not con.has_rows("pages"):
        return {}
    if not wanted & set(con.pages(with_trials=True)["variant"].astype(str)):
        return {}
    from tailscope.addr.explain import ExplainSettings, explain

    settings = ExplainSettings(threshold=analysis.settings.primary_threshold, permutations=199, seed=14)
    return {
        v: t for v, t in pages_tests(explain(campaign_dir, None, settings=settings)).items() if v in wanted
    }


def load_evidence(
    con: CampaignConnection, run_ids: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The per-trial evidence (EVIDENCE.md) of the given runs: os counters rows, co-runners (none where the
    store has no such table yet) and node facts, for the cause catalogue and the node verdicts."""
    counters = con.counters(run_ids, source="os")
    return counters, con.corunners(run_ids), con.nodes()


def with_attribution(
    con: CampaignConnection, analysis: CampaignAnalysis, runs: pd.DataFrame
) -> CampaignAnalysis:
    """Add the counter attribution (analysis/attribution.py) when the analysed runs have counters."""
    if not con.has_rows("counters"):
        return analysis
    from tailscope.analysis.run_columns import RunVerdicts

    counters = con.counters(RunVerdicts.of(analysis.runs).column("run_id").tolist())
    # the per-trial evidence (source os) is the cause catalogue's input, not a counter to rank: its
    # trial/wall_s restates the run time, and its tick counts grow with any slower run
    counters = counters.loc[counters["source"] != "os"].reset_index(drop=True)
    if counters.empty:  # evidence only (every check's): attribution and its scipy are not even imported
        return analysis
    from tailscope.analysis.attribution import METHOD, attribute
    section = attribute(analysis.runs, counters, runs, robust_cut=analysis.settings.robust_cut)
    if section is None:
        return analysis
    return dataclasses.replace(
        analysis, attribution=section, methods={**analysis.methods, "attribution": METHOD}
    )


def write_report(
    campaign_dir: Path, analysis: CampaignAnalysis, output: Path, *, con: CampaignConnection | None = None
) -> Path:
    """The HTML report at `output`, and beside it `<stem>-runs.csv` and `<stem>-nodes.csv` (every row of
    the tables the report shortens to the slowest 20); nodes, timelines and samples read on `con` when
    given."""
    from tailscope.report.html import render_html, select_timeline_runs
    from tailscope.report.models import load_deep

    if not output.parent.is_dir():
        raise StoreError(f"-o {output}: directory {output.parent} does not exist (create it first)")
    campaign = Campaign.open(campaign_dir)
    wanted = sorted({run_id for ids in select_timeline_runs(analysis).values() for run_id in ids})
    own = con is None
    if con is None:
        con = connect(campaign)
    try:
        nodes = con.nodes()
        iterations = con.iterations(wanted)
        samples = con.timeline_samples(MAX_TIMELINE_ROWS)
        injections = _optional_table(con, "injections")
        validation = _optional_table(con, "validation")
        hardware = con.hardware_counter_values()
    finally:
        if own:
            con.close()
    csv_files = {
        "runs": output.with_name(f"{output.stem}-runs.csv"),
        "nodes": output.with_name(f"{output.stem}-nodes.csv"),
    }
    # all three or none: a full disk or Ctrl-C leaves no CSV without its report (store/campaign.py)
    with atomic_files() as write:
        write(csv_files["runs"], runs_csv(analysis))
        write(csv_files["nodes"], nodes_csv(analysis).encode())
        html = render_html(
            analysis,
            manifest=campaign.manifest,
            nodes=nodes,
            iterations=iterations,
            generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            samples=samples,
            injections=injections,
            validation=validation,
            csv_files={k: p.name for k, p in csv_files.items()},
            campaign_dir=str(Path(campaign_dir).resolve()),
            hardware_counters=hardware > 0,
            deep=load_deep(campaign_dir),
        )
        write(output, html.encode())
    return output


def _optional_table(con: CampaignConnection, name: str) -> pd.DataFrame | None:
    """A table some campaigns have (the injections and scores of `validate`); None when it holds nothing."""
    if not con.campaign.shard_files(name):  # none stored: not even the typed empty frame (8 ms) is built
        return None
    frame = con.table(name)
    return None if frame.empty else frame


def runs_csv(analysis: CampaignAnalysis) -> bytes:
    """Every analysed run, one row each (the report lists only the slowest), ordered by (perf_ratio, node,
    trial) as `sorted` would (stable).

    Built column by column in Arrow from the runs' columns (no object per run): each text column's distinct
    values are quoted once (only where the csv module would quote them: a comma, quote or line break; the
    texts that repeat, as node, probe, unit and cause, told apart by one hash pass), numbers are formatted
    by Arrow (shortest round-trip: `123`, `0.00001`, `1e-7`), NaN and None are empty; the lines are joined,
    put in order and written as one buffer (50,000 runs: 0.08 s; cell by cell in Python: 0.17-0.20 s,
    issue 11)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tailscope.analysis.run_columns import RunVerdicts
    from tailscope.probes.catalogue import variant_name
    from tailscope.report.answer import by_ratio, top_causes

    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    header = ["run_id", "node", "probe", "variant", "variant_id", "trial", "started_at", "value", "unit",
              "perf_ratio", "scaled_value", "slow", "flagged", "kind", "cause",
              "cause_confidence"]  # fmt: skip
    runs = RunVerdicts.of(analysis.runs)  # by column: no object per run
    if not runs:
        return (",".join(header) + "\n").encode()

    def text(values: Any) -> pa.Array:
        column = pa.array(values, pa.string())
        if not pc.any(pc.match_substring_regex(column, _CSV_NEEDS_CARE)).as_py():
            return column.fill_null("")
        encoded = column.dictionary_encode()
        quoted = pa.array([_csv_text(v) for v in encoded.dictionary.to_pylist()], pa.string())
        return quoted.take(encoded.indices).fill_null("")

    def repeated(values: np.ndarray) -> pa.Array:
        """A text column of few distinct values (node, probe, unit, kind): a hash pass, then each distinct
        value's cell written once, instead of Arrow's regex over every cell."""
        codes, distinct = pd.factorize(values)  # None: -1
        return coded(codes, distinct.tolist())

    def coded(codes: np.ndarray, values: list[Any], end: str = "") -> pa.Array:
        """The cells of `values` (None: empty) at `codes` (-1: empty), each followed by `end`."""
        cells = [_csv_text(v) + end for v in values] + [end]
        codes = np.where(codes < 0, len(cells) - 1, codes).astype(np.int32)
        return pa.DictionaryArray.from_arrays(codes, cells).cast(pa.string())

    def flag(name: str) -> pa.Array:
        values = np.asarray(runs.column(name), dtype=np.int8)
        return pa.DictionaryArray.from_arrays(values, ["False", "True"]).cast(pa.string())

    def number(name: str, kind: pa.DataType) -> pa.Array:
        values = runs.column(name)
        if values.dtype == object:  # an odd value a test set: as the list of Python values
            values = values.tolist()
        return pc.cast(pa.array(values, kind, from_pandas=True), pa.string()).fill_null("")

    variant, variants = pd.factorize(runs.column("variant"))
    causes, confidences = {"-": 0}, {"": 0}  # the cells of a run without causes
    cause = np.zeros(len(runs), dtype=np.int32)
    confidence = np.zeros(len(runs), dtype=np.int32)
    for row, finding in top_causes(runs).items():
        cause[row] = causes.setdefault(finding.cause, len(causes))
        confidence[row] = confidences.setdefault(finding.confidence, len(confidences))
    columns = [
        text(runs.column("run_id")),
        repeated(runs.column("node")),
        repeated(runs.column("probe")),
        coded(variant, [names.get(v, v) for v in variants.tolist()]),
        coded(variant, variants.tolist()),
        number("trial", pa.int64()),
        text(runs.column("started_at")),
        number("value", pa.float64()),
        repeated(runs.column("unit")),
        number("perf_ratio", pa.float64()),
        number("scaled_value", pa.float64()),
        flag("slow"),
        flag("flagged"),
        repeated(runs.column("kind")),
        coded(cause, list(causes)),
        coded(confidence, list(confidences), end="\n"),  # the last cell ends its line
    ]
    lines = pc.binary_join_element_wise(*columns, ",")
    ordered = lines.take(pa.array(by_ratio(runs), pa.int64()))
    offsets = np.frombuffer(ordered.buffers()[1], dtype=np.int32)[
        ordered.offset : ordered.offset + len(ordered) + 1
    ]
    body = memoryview(ordered.buffers()[2])[offsets[0] : offsets[-1]]
    return (",".join(header) + "\n").encode() + bytes(body)


_CSV_SPECIAL = re.compile(r'[",\r\n]')
# OWASP's CSV-injection rule: a spreadsheet runs a cell that starts with = + - @ (or TAB, CR before them)
# as a formula (`+cmd|' /C calc'!A0`, `@SUM(1)`); such a text cell is written with a leading ' (shown as
# text). Only text cells (node names, labels, causes): numbers are written as numbers, -0.5 stays -0.5.
# A lone sign ("-": no cause) is no formula and stays as it is.
_FORMULA_START = re.compile(r"[=+\-@\t\r].")
_CSV_NEEDS_CARE = r'[",\r\n]|^[=+\-@\t].'


def csv_text_cell(v: Any) -> str | None:
    """A text cell's value as it is written: a formula-looking text with a leading ' (OWASP), else as is."""
    if v is None:
        return None
    s = str(v)
    return f"'{s}" if _FORMULA_START.match(s) else s


def _csv_text(v: Any) -> str:
    """One text cell as the csv module writes it (QUOTE_MINIMAL): None empty, a text with a comma, quote or
    line break quoted with its quotes doubled; one that a spreadsheet would run as a formula, as text."""
    s = csv_text_cell(v)
    if s is None:
        return ""
    return f'"{s.replace(chr(34), chr(34) * 2)}"' if _CSV_SPECIAL.search(s) else s


def nodes_csv(analysis: CampaignAnalysis) -> str:
    """Every (variant, node) ensemble: runs, median with its interval, CV, slow counts, vs fleet."""
    from tailscope.probes.catalogue import variant_name

    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    rows = []
    for g in sorted(analysis.groups, key=lambda g: (g.variant, g.node_ratio)):
        row = {
            "variant": csv_text_cell(names.get(g.variant, g.variant)),
            "variant_id": csv_text_cell(g.variant),
            "node": csv_text_cell(g.node),
            "runs": g.n,
            "failed": g.n_failed,
            "median": g.median,
            "median_low": g.median_ci.lower,
            "median_high": g.median_ci.upper,
            "cv": g.cv,
            "min": g.minimum,
            "max": g.maximum,
            "systematic": g.n_systematic,
            "transient": g.n_transient,
            "node_ratio": g.node_ratio,
            "node_outlier": g.node_outlier,
        }
        for t in g.tails:
            row[f"slow_{t.threshold:g}"] = t.k
            row[f"slow_{t.threshold:g}_p"] = t.p_value
        rows.append(row)
    return pd.DataFrame(rows).to_csv(index=False)


MAX_TIMELINE_ROWS = 2_000_000  # monitor samples summed over units; more than this and no timelines are drawn


__all__ = [
    "RunRequest",
    "analyze_and_report",
    "analyze_campaign",
    "load_frames",
    "run_campaign",
    "write_report",
]
