"""`tailscope validate`: a campaign with a random, recorded schedule of injections, then its scores.

The trials run through the ordinary runner (workflow.run_campaign); its `before_trial` hook starts and stops
the injections at block boundaries: the trials are cut into blocks of `block` trials, a share of the
blocks (`inject_fraction`) gets one injection each -- a (kind, intensity) cell drawn so that every cell of
every kind's graded intensities comes round equally often -- and the others stay clean, with injected
blocks placed between clean ones. The schedule (seed included) goes into the `injections` table, the
scores (score.py) into `validation`. verbs/validate.py runs the campaign and scores it
(`analysis_for_scoring` there is the one place the analysis is made for scoring).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.campaign.runner import Trial
from tailscope.inject.control import Injection, freq_cap_available
from tailscope.inject.kinds import KINDS, InjectInputError, InjectorKind, kind_named
from tailscope.inject.score import validation_rows
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")
# The schedule so far, beside the campaign's store while validate runs (rewritten atomically at every block
# boundary): a validate that was SIGKILLed has stored its trials (a commit per block) but not its schedule;
# `--rescore` stores the schedule from here, then scores. Removed once the schedule is in the store.
SCHEDULE_FILE = "validate-schedule.json"


@dataclass(frozen=True)
class ValidateRequest:
    injectors: tuple[str, ...] | None = None  # None: every kind that can act here
    trials: int = 200
    campaign_dir: Path | None = None
    seed: int | None = None
    probe: str = "stream"
    probe_params: dict[str, Any] = field(default_factory=dict)
    block: int = 4
    inject_fraction: float = 0.25
    reserve: str = "512m"
    show_progress: bool = True
    threshold: float = 0.10


@dataclass(frozen=True)
class Block:
    index: int
    position: int  # first trial of the block, counted from 0 within this validate run
    size: int
    kind: InjectorKind | None
    intensity: float | None


SWAP_NEEDED = 2 << 30  # memthrash leaves tsinject's 1 GiB --reserve of swap and pages through the rest


def swap_free_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("SwapFree:"):
            return int(line.split()[1]) * 1024
    return 0


def why_unavailable(kind: InjectorKind) -> str | None:
    """Why `kind` cannot act on this node (None when it can)."""
    if kind.name == "freq-cap" and not freq_cap_available():
        return "no cpufreq (scaling_max_freq) on this node"
    if kind.name == "cpu-quota":
        from tailscope.inject.cgroups import cpu_hierarchy

        try:
            cpu_hierarchy()
        except InjectInputError as exc:
            return str(exc)
        if os.geteuid() != 0:
            return "needs root to create a cgroup"
    if kind.name == "memthrash" and swap_free_bytes() < SWAP_NEEDED:
        return (
            f"no swap (SwapFree below {SWAP_NEEDED >> 30} GiB): taking more than RAM ends in the OOM killer "
            "here, not in paging"
        )
    if kind.name == "thp-fragment":
        if os.geteuid() != 0:
            return "needs root (page frame numbers, compact_unevictable_allowed)"
        if THP_ENABLED.exists() and "[never]" in THP_ENABLED.read_text():
            return "transparent huge pages are off (never)"
    return None


def choose_kinds(names: tuple[str, ...] | None) -> tuple[list[InjectorKind], dict[str, str]]:
    skipped: dict[str, str] = {}
    kinds = []
    for name in names or tuple(KINDS):
        kind = kind_named(name)
        why = why_unavailable(kind)
        if why is None:
            kinds.append(kind)
        elif names:  # asked for by name: say it cannot act, once, with exit 2
            raise InjectInputError(f"--injectors {name}: cannot act here: {why}")
        else:
            skipped[name] = why
    return kinds, skipped


@dataclass(frozen=True)
class CpuPlan:
    """Where the probe runs and where the injectors that must not take its CPU time run."""

    probe: list[int]
    neighbours: list[int]  # online CPUs the probe does not use
    note: str | None = None  # said with the scores when the probe's CPUs were narrowed for the neighbours


def plan_cpus(
    kinds: list[InjectorKind], probe_cpus: list[int], online: list[int], *, pinned: bool
) -> tuple[CpuPlan, list[InjectorKind], dict[str, str]]:
    """Keep CPUs beside the probe's for the injectors that share its cache or memory bandwidth (and for the
    memory injectors' own CPU time): without that, a cachecopy thread on the probe's CPU is CPU contention,
    and the scores would measure the wrong cause. When the probe would use every CPU and its CPUs were not
    given (`--param cpus=`), its last CPU is left to the neighbours; when they were given, or there is only
    one CPU, the neighbour kinds are skipped with the reason."""
    neighbours = [c for c in online if c not in probe_cpus]
    wants = any(k.placement == "neighbour" for k in kinds)
    note = None
    if wants and not neighbours and len(probe_cpus) > 1 and not pinned:
        neighbours = probe_cpus[-1:]
        probe_cpus = probe_cpus[:-1]
        from tailscope.analysis.causes.context import cpu_list_text

        note = (
            f"the probe ran on {cpu_list_text(probe_cpus)} and the cache and memory-bandwidth injectors "
            f"on CPU {neighbours[0]} beside it (they must share its cache or memory, not its time)"
        )
    kept, skipped = [], {}
    for k in kinds:
        if k.placement == "neighbour" and not neighbours:
            skipped[k.name] = (
                "needs a CPU beside the probe's (give the probe fewer CPUs with --param cpus=LIST)"
                if pinned or len(probe_cpus) > 1
                else "needs a CPU beside the probe's, and this node has one CPU"
            )
        else:
            kept.append(k)
    return CpuPlan(probe_cpus, neighbours, note), kept, skipped


def make_schedule(
    trials: int, block: int, inject_fraction: float, kinds: list[InjectorKind], rng: random.Random
) -> list[Block]:
    """Blocks of `block` trials; round(inject_fraction x blocks) injected, placed between clean blocks."""
    n_blocks = -(-trials // block)
    n_inj = min(n_blocks - 1, max(1, round(inject_fraction * n_blocks))) if kinds else 0
    n_clean = n_blocks - n_inj
    cells = [(k, i) for k in kinds for i in k.graded]
    drawn: list[tuple[InjectorKind, float]] = []
    while len(drawn) < n_inj:
        rnd = cells[:]
        rng.shuffle(rnd)
        drawn += rnd
    drawn = drawn[:n_inj]
    # gap g holds the injected blocks placed before clean block g (g = n_clean: after the last)
    gaps = list(range(n_clean + 1))
    chosen = sorted(rng.sample(gaps, n_inj) if n_inj <= len(gaps) else rng.choices(gaps, k=n_inj))
    order: list[tuple[InjectorKind, float] | None] = []
    it = iter(drawn)
    for g in range(n_clean + 1):
        order += [next(it) for _ in range(chosen.count(g))]
        if g < n_clean:
            order.append(None)
    out = []
    for index, cell in enumerate(order):
        position = index * block
        size = min(block, trials - position)
        out.append(Block(index, position, size, cell[0] if cell else None, cell[1] if cell else None))
    return out


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(value: object) -> str:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


@dataclass
class Scheduler:
    """The runner's before_trial hook: the injection of each trial's block, started/stopped at boundaries."""

    blocks: list[Block]
    plan: CpuPlan
    reserve: str
    schedule_file: Path | None = None  # SCHEDULE_FILE, with what store_injections needs besides records
    schedule_meta: dict[str, Any] = field(default_factory=dict)
    variant: str = ""
    seen: int = 0
    current: Injection | None = None
    current_block: Block | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def block_at(self, position: int) -> Block:
        for b in self.blocks:
            if b.position <= position < b.position + b.size:
                return b
        return self.blocks[-1]

    def before_trial(self, trial: Trial) -> None:
        block = self.block_at(self.seen)
        self.seen += 1
        self.variant = trial.variant.variant_id
        if block is not self.current_block:
            self.stop()
            self.current_block = block
            if block.kind is not None and block.intensity is not None:
                cpus = self.plan.neighbours if block.kind.placement == "neighbour" else self.plan.probe
                inj = Injection(
                    block.kind,
                    block.intensity,
                    cpus=cpus,
                    pids=[os.getpid()] if block.kind.name == "cpu-quota" else [],
                    reserve=self.reserve,
                    home_cpus=(self.plan.neighbours or None) if block.kind.placement == "beside" else None,
                )
                self.records.append(
                    {
                        "block": block.index,
                        "variant": trial.variant.variant_id,
                        "trial_first": trial.index,
                        "trial_last": trial.index,
                        "kind": block.kind.name,
                        "intensity": block.intensity,
                        "cpus": ",".join(map(str, inj.cpus if block.kind.needs_cpus else inj.home_cpus or []))
                        or None,
                        "expected_cause": block.kind.expected_cause,
                        "started_at": None,
                        "ended_at": None,
                        "details": None,
                    }
                )
                self._save()  # before the injection starts: a SIGKILL from here on leaves its record
                inj.start()
                self.current = inj
                self.records[-1]["started_at"] = _utcnow()
                self._save()
        elif self.current is not None:
            self.records[-1]["trial_last"] = trial.index
            self._save()

    def _save(self) -> None:
        if self.schedule_file is None or not self.schedule_file.parent.is_dir():
            return
        from tailscope.store.campaign import write_atomic_bytes

        text = json.dumps({**self.schedule_meta, "records": self.records}, default=_iso)
        write_atomic_bytes(self.schedule_file, text.encode())

    def stop(self) -> None:
        inj, self.current = self.current, None
        if inj is not None:
            try:
                inj.stop()
            finally:
                self.records[-1]["ended_at"] = _utcnow()
                self.records[-1]["details"] = json.dumps({"ready": inj.ready, "done": inj.done}, default=str)


INJECTOR_COMM = "tsinject"


def outside_shares(campaign_dir: Path) -> dict[str, float]:
    """Per run: the share of the probe CPUs that work outside the schedule took, as the kernel counted it
    (/proc/stat's others and steal, through the cause catalogue's own features), less what the injector
    itself took (its co-runner rows). Runs without evidence are left out."""
    from tailscope.analysis.causes.context import run_features
    from tailscope.store.read import connect

    con = connect(campaign_dir)
    try:
        run_ids = con.runs()["run_id"].astype(str).tolist()
        counters = con.counters(run_ids, source="os")
        corunners = con.corunners(run_ids)
    finally:
        con.close()
    features, _ = run_features(counters)
    if features.empty:
        return {}
    injector: dict[str, float] = {}
    if not corunners.empty:
        mine = corunners.loc[corunners["comm"] == INJECTOR_COMM]
        injector = mine.groupby("run_id")["share"].sum().to_dict()
    out = {}
    for run_id, row in features.iterrows():
        others = row.get("others_share")
        steal = row.get("steal_share")
        if others is None or others != others:
            continue
        steal = 0.0 if steal is None or steal != steal else float(steal)
        out[str(run_id)] = max(0.0, float(others) - injector.get(str(run_id), 0.0)) + steal
    return out


def recover_schedule(root: Path, saved: Path) -> None:
    """Store the schedule a killed validate left beside its campaign (SCHEDULE_FILE), then drop the file."""
    try:
        data = json.loads(saved.read_text())
        records = [
            {
                **r,
                "started_at": dt.datetime.fromisoformat(r["started_at"]) if r.get("started_at") else None,
                "ended_at": dt.datetime.fromisoformat(r["ended_at"]) if r.get("ended_at") else None,
            }
            for r in data["records"]
        ]
        node, task, seed = str(data["node"]), str(data["task"]), int(data["seed"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InjectInputError(f"{saved}: unreadable schedule of a stopped validate: {exc}") from exc
    store_injections(root, records, node=node, task=task, seed=seed)
    saved.unlink()


def store_injections(root: Path, records: list[dict[str, Any]], *, node: str, task: str, seed: int) -> None:
    if not records:
        return
    with load_into(root, "validate") as tx:
        rows = [
            {
                **r,
                "campaign": tx.campaign_id,
                "node": node,
                "task": task,
                "seed": seed,
                "started_at": r["started_at"] or _utcnow(),
            }
            for r in records
        ]
        tx.write("injections", pa.Table.from_pylist(rows, schema=TABLES["injections"].schema), node=node)


def store_scores(root: Path, scores: dict[str, Any], *, node: str, task: str) -> None:
    now = _utcnow()
    with load_into(root, "validate") as tx:
        rows = [
            {**r, "campaign": tx.campaign_id, "task": task, "scored_at": now} for r in validation_rows(scores)
        ]
        tx.write("validation", pa.Table.from_pylist(rows, schema=TABLES["validation"].schema), node=node)


def _pct(r: dict[str, Any] | None) -> str:
    if not r or r.get("rate") is None:
        return "n/a (no runs)"
    ci = r["ci"]
    return f"{r['rate']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}] ({r['successes']}/{r['trials']})"


def render_scores(result: dict[str, Any]) -> list[str]:
    lines = [f"campaign: {result['campaign']}", f"seed: {result['seed']}  trials: {result['trials']}"]
    lines += [f"skipped {k}: {why}" for k, why in result.get("skipped", {}).items()]
    if (result.get("cpus") or {}).get("note"):
        lines.append(f"cpus: {result['cpus']['note']}")
    if "scores" not in result:
        lines.append(
            f"interrupted: no scores; `tailscope validate --rescore --campaign {result['campaign']}` scores "
            "the trials stored"
        )
        return lines
    s = result["scores"]
    lines.append(f"false-positive rate on clean runs: {_pct(s['clean'])}")
    if "placebo" in s:
        lines.append(
            f"placebo: clean runs >= {s['threshold']:.0%} slower than the clean runs around them "
            f"(noise alone): {_pct(s['placebo'])}"
        )
    if "unbacked" in s:
        flag = f"{s['flag_threshold']:.0%}"
        lines.append(
            f"  flags are at analyze's {flag} slow threshold: clean runs >= {flag} slower than the clean "
            f"runs around them (what a perfect flag would count here): {_pct(s['placebo_flag'])}; clean runs "
            f"flagged though less than {flag} slower than those and than the clean median (tailscope's own "
            "false alarms): "
            f"{_pct(s['unbacked'])}"
        )
    if s.get("outside_known"):
        lines.append(
            f"  on quiet clean runs (outside work took < {s['quiet_limit']:.0%} of the probe CPUs): "
            f"{_pct(s['clean_quiet'])}; placebo {_pct(s['placebo_quiet'])}"
            + (
                f"; at the flag threshold {_pct(s['placebo_flag_quiet'])}; own false alarms "
                f"{_pct(s['unbacked_quiet'])}"
                if "unbacked_quiet" in s
                else ""
            )
        )
    window = s.get("reference_window")
    ref = f"the {window} nearest clean runs" if window else "all clean runs"
    lines.append(
        f"detection recall (injected slowdown >= {s['threshold']:.0%} against the median of {ref}), "
        "95% Clopper-Pearson:"
    )
    for d in s["detection"]:
        what = "all" if d["intensity"] is None else f"{d['intensity']:g}"
        med = "" if d["median_slowdown"] is None else f", median slowdown {d['median_slowdown']:+.1%}"
        lines.append(
            f"  {d['kind']:12s} {what:>6s}: {_pct(d)}; {d['effective']}/{d['runs']} runs slowed enough{med}"
        )
    lines.append("cause accuracy (top-1 | top-2):")
    for c in s["causes"]:
        lines.append(f"  {c['expected_cause']:28s} {_pct(c['top1'])} | {_pct(c['top2'])}")
    for c in s.get("causes_pooled") or []:
        pair = c["expected_cause"]
        lines.append(f"  {pair:28s} {_pct(c['top1'])} | {_pct(c['top2'])} (either counts)")
    if s.get("outside_known") and s.get("causes_quiet"):
        lines.append(f"cause accuracy on quiet runs (outside work < {s['quiet_limit']:.0%}; top-1 | top-2):")
        for c in s["causes_quiet"]:
            lines.append(f"  {c['expected_cause']:28s} {_pct(c['top1'])} | {_pct(c['top2'])}")
    if s["confusion"]["rows"]:
        labels = s["confusion"]["labels"]
        lines.append("confusion (rows: injected cause; columns: tailscope's top cause):")
        lines.append("  " + " " * 28 + " ".join(f"{x[:10]:>10s}" for x in labels))
        for e, cells in s["confusion"]["rows"].items():
            lines.append(f"  {e:28s}" + " ".join(f"{cells.get(x, 0):10d}" for x in labels))
    for n in s["nodes"]:
        lines.append(f"node {n['node']}: {n['verdict']} ({'; '.join(map(str, n['reasons']))})")
    lines += [f"note: {n}" for n in s["notes"]]
    return lines
