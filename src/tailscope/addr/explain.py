"""`tailscope addr explain`: does a campaign's slowness depend on the physical pages its trials got?

Per variant, from each trial's recorded pages and its outcome (slow = the analysis' RunVerdict.slow, i.e.
performance ratio against its node's median below 1 - threshold):

1. Slice and set loads (when a slice-hash model is known): each trial's data lines are placed in their
   thread's L2, then counted per slice and per (slice, set) of a snoop-filter model (`snoop.py`); the
   predicted conflict (lines beyond the ways of their set) ranks page sets, the basis of page sorting.
   Whether slow trials have a higher predicted conflict is tested by permutation.
2. A search over address-bit parities of the page frames: for every set of up to `order` frame bits, the
   fraction of a trial's pages on which their parity is odd; the standardised difference of that fraction
   between slow and normal trials is computed for every candidate at once. Its largest absolute value is
   compared with the largest obtained when the slow labels are permuted among the trials of each node
   (max-statistic permutation test): the adjusted p-value of a candidate is the fraction of permutations
   whose best candidate did as well, so searching many candidates does not manufacture findings.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tailscope.addr.errors import AddressRangeError, AddrInputError
from tailscope.addr.model import SliceHashModel
from tailscope.addr.snoop import SnoopFilterModel, estimate
from tailscope.node.hugepages import vm_statement

MAX_CANDIDATES = 20000
PAGES_PER_PASS = 4096  # pages whose parities are held at once (x candidates booleans)


@dataclass(frozen=True)
class ExplainSettings:
    threshold: float = 0.05  # slow: performance ratio below 1 - threshold
    order: int = 2  # parities of up to this many frame bits
    permutations: int = 999
    alpha: float = 0.01  # report parities whose adjusted p-value is at most this
    seed: int | None = None

    def check(self) -> None:
        if not 0 < self.threshold < 1:
            raise AddrInputError(f"--threshold {self.threshold}: expected a fraction in (0, 1), e.g. 0.05")
        if not 1 <= self.order <= 4:
            raise AddrInputError(f"--order {self.order}: expected 1..4 frame bits per parity")
        if self.permutations < 19:
            raise AddrInputError(f"--permutations {self.permutations}: expected at least 19")
        if not 0 < self.alpha < 1:
            raise AddrInputError(f"--alpha {self.alpha}: expected a number in (0, 1)")


@dataclass(frozen=True)
class RunAddresses:
    run_id: str
    node: str
    trial: int
    perf_ratio: float
    slow: bool
    pages: int
    lines: int | None = None  # data lines modelled (None without a model)
    slice_imbalance: float | None = None
    set_imbalance: float | None = None
    predicted_eviction: float | None = None


@dataclass(frozen=True)
class ParityFeature:
    bits: tuple[int, ...]  # physical address bits whose parity is taken
    z: float  # standardised difference slow - normal of the fraction of pages with odd parity
    p_adjusted: float  # max-statistic permutation p-value
    odd_fraction_slow: float
    odd_fraction_normal: float


@dataclass(frozen=True)
class ConflictTest:
    z: float
    p_value: float  # one-sided permutation p: slow trials predicted to conflict more
    auc: float  # P(predicted conflict of a slow trial > that of a normal one), ties count half


@dataclass(frozen=True)
class VariantExplanation:
    variant: str
    probe: str
    trials: int
    slow: int
    trials_with_pages: int
    frame_bits: tuple[int, int] | None  # lowest, highest frame bit searched
    candidates: int
    permutations: int
    best: ParityFeature | None
    findings: tuple[ParityFeature, ...]
    conflict: ConflictTest | None
    runs: tuple[RunAddresses, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Explanation:
    campaign: str
    model: str | None
    snoop_filter: dict[str, Any]
    settings: dict[str, Any]
    variants: tuple[VariantExplanation, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)


# --- loading ---------------------------------------------------------------------------------------------
def _load(campaign_dir: Path) -> tuple[str, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    campaign = Campaign.open(Path(campaign_dir))
    con = connect(campaign)
    try:
        runs = con.runs()
        pages = con.pages()
        nodes = con.nodes()[["node", "virtualization"]]
    finally:
        con.close()
    return campaign.campaign_id, runs, pages, nodes


def _slow_runs(runs: pd.DataFrame, threshold: float, campaign: str) -> pd.DataFrame:
    """run_id, node, variant, trial, perf_ratio, slow of the ok runs, from the analysis."""
    from tailscope.analysis.model import Settings
    from tailscope.analysis.summary import RUN_COLUMNS, analyze

    if runs.empty:
        return pd.DataFrame(columns=["run_id", "node", "variant", "probe", "trial", "perf_ratio", "slow"])
    try:
        result = analyze(runs[list(RUN_COLUMNS)], pd.DataFrame(), Settings(thresholds=(threshold,)), campaign)
    except ValueError as exc:
        raise AddrInputError(f"cannot tell slow trials: {exc}") from None
    return pd.DataFrame(
        [
            {
                "run_id": v.run_id,
                "node": v.node,
                "variant": v.variant,
                "probe": v.probe,
                "trial": v.trial,
                "perf_ratio": v.perf_ratio,
                "slow": v.slow,
            }
            for v in result.runs
        ]
    )


def run_lines(pages: pd.DataFrame, config: str | None) -> tuple[np.ndarray, np.ndarray]:
    """A trial's data lines in sweep order and the thread owning each.

    With the probe's config (l2sum: `offset`, params `data_bytes` and `chunk_bytes_per_thread`) only the
    data bytes are modelled and threads own their exact chunks; otherwise every line of every page, owned
    by the page's recorded thread.
    """
    cfg: dict[str, Any] = {}
    if config:
        try:
            cfg = json.loads(config)
        except json.JSONDecodeError:
            cfg = {}
    params = cfg.get("params") or {}
    data_bytes = params.get("data_bytes")
    chunks = params.get("chunk_bytes_per_thread")
    offset = int(cfg.get("offset") or 0)
    out_a: list[np.ndarray] = []
    out_t: list[np.ndarray] = []
    for _, arr in pages.sort_values(["array", "virtual_address"]).groupby("array", sort=True):
        va0 = int(arr["virtual_address"].iloc[0])
        for va, pa, size, thread in zip(
            arr["virtual_address"], arr["physical_address"], arr["page_size"], arr["thread"], strict=True
        ):
            start = int(va) - va0  # byte position of the page in the array's mapping
            lo, hi = 0, int(size)
            if isinstance(data_bytes, int) and len(arr["array"].unique()) == 1:
                lo = max(lo, offset - start)
                hi = min(hi, offset + data_bytes - start)
            if hi <= lo:
                continue
            first_line = (lo + 63) // 64 if lo > 0 else 0
            line_offsets = np.arange(first_line, (hi + 63) // 64, dtype=np.int64) * 64
            out_a.append(np.uint64(int(pa)) + line_offsets.astype(np.uint64))
            if isinstance(chunks, list) and chunks and isinstance(data_bytes, int):
                bounds = np.cumsum(np.asarray(chunks, dtype=np.int64))
                position = start + line_offsets - offset
                out_t.append(np.minimum(np.searchsorted(bounds, position, side="right"), len(chunks) - 1))
            else:
                t = -1 if pd.isna(thread) else int(thread)
                out_t.append(np.full(line_offsets.size, t, dtype=np.int64))
    if not out_a:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    return np.concatenate(out_a), np.concatenate(out_t)


# --- the parity search -------------------------------------------------------------------------------------
def _candidates(frames: np.ndarray, lo: int, hi: int, order: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Bits of the page frames that vary, and every combination of up to `order` of them."""
    bits = [b for b in range(lo, hi + 1) if len(np.unique((frames >> np.uint64(b)) & np.uint64(1))) > 1]
    combos: list[tuple[int, ...]] = []
    for k in range(1, order + 1):
        combos.extend(itertools.combinations(bits, k))
        if len(combos) > MAX_CANDIDATES:
            raise AddrInputError(
                f"--order {order} gives more than {MAX_CANDIDATES} parities over {len(bits)} frame bits; "
                "lower it"
            )
    return np.array(bits, dtype=np.int64), combos


def _standardised(y: np.ndarray, features: np.ndarray, sd: np.ndarray) -> np.ndarray:
    """(mean slow - mean normal) / sd * sqrt(ns * nn / n) for every row of y (K x R) and feature column."""
    n = features.shape[0]
    ns = y.sum(axis=-1, keepdims=True)
    nn = n - ns
    total = features.sum(axis=0)
    slow_sum = y @ features
    diff = slow_sum / np.maximum(ns, 1) - (total - slow_sum) / np.maximum(nn, 1)
    scale = np.sqrt(ns * nn / n)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(sd > 0, diff / sd * scale, 0.0)
    return z


def _permuted(y: np.ndarray, strata: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k copies of y, each shuffled within its strata (K x R)."""
    keys = rng.random((k, y.size))
    order = np.lexsort((keys, np.broadcast_to(strata, keys.shape)), axis=-1)
    by_stratum = np.argsort(strata, kind="stable")
    out = np.empty((k, y.size), dtype=float)
    out[:, by_stratum] = y[order]
    return out


def _odd_fractions(
    frames_by_run: list[np.ndarray], bits: np.ndarray, combos: list[tuple[int, ...]], order: int
) -> np.ndarray:
    """features[r, j]: the fraction of run r's pages on which the bits of combos[j] have odd parity.

    Computed for groups of runs holding at most PAGES_PER_PASS pages, so thousands of 4 KiB pages per run
    times thousands of parities stay within memory."""
    column = {b: i for i, b in enumerate(bits.tolist())}
    # combos as column indices, padded with an all-zero column so every combo XORs `order` columns
    index = np.full((len(combos), order), bits.size, dtype=np.int64)
    for j, combo in enumerate(combos):
        index[j, : len(combo)] = [column[b] for b in combo]
    counts = np.array([f.size for f in frames_by_run])
    features = np.empty((len(frames_by_run), len(combos)))
    shifts = bits.astype(np.uint64)
    start = 0
    while start < len(frames_by_run):
        stop, pages = start, 0
        while stop < len(frames_by_run) and (stop == start or pages + counts[stop] <= PAGES_PER_PASS):
            pages += counts[stop]
            stop += 1
        frames = np.concatenate(frames_by_run[start:stop])
        page_bits = np.zeros((frames.size, bits.size + 1), dtype=bool)
        page_bits[:, :-1] = ((frames[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)
        parity = page_bits[:, index[:, 0]]
        for k in range(1, order):
            parity ^= page_bits[:, index[:, k]]
        offsets = np.r_[0, np.cumsum(counts[start:stop])[:-1]]
        features[start:stop] = (
            np.add.reduceat(parity, offsets, axis=0, dtype=np.float64) / counts[start:stop, None]
        )
        start = stop
    return features


def parity_search(
    frames_by_run: list[np.ndarray],
    slow: np.ndarray,
    strata: np.ndarray,
    frame_bit: int,
    settings: ExplainSettings,
    rng: np.random.Generator,
) -> tuple[tuple[int, int] | None, int, ParityFeature | None, tuple[ParityFeature, ...]]:
    """(frame bits searched, candidates, best parity, significant parities) for one variant."""
    all_frames = np.concatenate(frames_by_run)
    hi = int(all_frames.max()).bit_length() - 1 if all_frames.size and all_frames.max() else frame_bit
    bits, combos = _candidates(all_frames, frame_bit, hi, settings.order)
    if not combos:
        return (frame_bit, hi), 0, None, ()
    features = _odd_fractions(frames_by_run, bits, combos, settings.order)
    y = slow.astype(float)
    sd = features.std(axis=0)
    observed = _standardised(y[None, :], features, sd)[0]
    null_max = np.empty(settings.permutations)
    for start in range(0, settings.permutations, 200):
        k = min(200, settings.permutations - start)
        null_max[start : start + k] = np.abs(_standardised(_permuted(y, strata, k, rng), features, sd)).max(
            axis=1
        )
    p_adjusted = (1 + (null_max[None, :] >= np.abs(observed)[:, None] - 1e-12).sum(axis=1)) / (
        settings.permutations + 1
    )

    def feature(j: int) -> ParityFeature:
        return ParityFeature(
            bits=tuple(int(b) for b in combos[j]),
            z=float(observed[j]),
            p_adjusted=float(p_adjusted[j]),
            odd_fraction_slow=float(features[slow, j].mean()) if slow.any() else float("nan"),
            odd_fraction_normal=float(features[~slow, j].mean()) if (~slow).any() else float("nan"),
        )

    ranked = np.argsort(-np.abs(observed), kind="stable")
    best = feature(int(ranked[0]))
    findings = tuple(feature(int(j)) for j in ranked[:10] if p_adjusted[j] <= settings.alpha)
    return (frame_bit, hi), len(combos), best, findings


def conflict_test(
    predicted: np.ndarray,
    slow: np.ndarray,
    strata: np.ndarray,
    settings: ExplainSettings,
    rng: np.random.Generator,
) -> ConflictTest:
    x = predicted[:, None].astype(float)
    sd = x.std(axis=0)
    y = slow.astype(float)
    z = float(_standardised(y[None, :], x, sd)[0, 0])
    null = _standardised(_permuted(y, strata, settings.permutations, rng), x, sd)[:, 0]
    p = (1 + int((null >= z - 1e-12).sum())) / (settings.permutations + 1)
    ranks = pd.Series(predicted).rank().to_numpy()
    ns, nn = int(slow.sum()), int((~slow).sum())
    auc = (ranks[slow].sum() - ns * (ns + 1) / 2) / (ns * nn) if ns and nn else float("nan")
    return ConflictTest(z=z, p_value=p, auc=float(auc))


# --- the whole campaign ------------------------------------------------------------------------------------
def explain(
    campaign_dir: Path,
    model: SliceHashModel | None,
    sf: SnoopFilterModel | None = None,
    settings: ExplainSettings | None = None,
) -> Explanation:
    settings = settings or ExplainSettings()
    settings.check()
    sf = sf or SnoopFilterModel()
    rng = np.random.default_rng(settings.seed)
    campaign, runs, pages, nodes = _load(campaign_dir)
    verdicts = _slow_runs(runs, settings.threshold, campaign)
    notes: list[str] = []
    virtual = nodes[~nodes["virtualization"].fillna("none").str.lower().isin(["none", ""])]
    if len(virtual):
        notes.append(
            vm_statement(dict(zip(virtual["node"].astype(str), virtual["virtualization"], strict=True)))
        )
    if model is None:
        notes.append("no slice-hash model: slice and set loads are not modelled (give --model or the tables)")
    pages = pages[pages["physical_address"].notna()].copy()
    pages["physical_address"] = pages["physical_address"].astype(np.int64).astype(np.uint64)
    configs = runs.set_index("run_id")["config"] if "config" in runs else pd.Series(dtype=object)
    variants = []
    for variant, group in verdicts.groupby("variant", sort=True):
        variants.append(_explain_variant(str(variant), group, pages, configs, model, sf, settings, rng))
    if not variants:
        notes.append("no ok trials in this campaign")
    return Explanation(
        campaign=campaign,
        model=model.name if model else None,
        snoop_filter={
            "sets": sf.sets,
            "ways": sf.ways,
            "set_masks": [hex(m) for m in sf.set_rows],
            "l2_bytes": sf.l2_bytes,
            "l2_ways": sf.l2_ways,
        },
        settings={
            "threshold": settings.threshold,
            "order": settings.order,
            "permutations": settings.permutations,
            "alpha": settings.alpha,
        },
        variants=tuple(variants),
        notes=tuple(notes),
    )


def _explain_variant(
    variant: str,
    group: pd.DataFrame,
    pages: pd.DataFrame,
    configs: pd.Series,
    model: SliceHashModel | None,
    sf: SnoopFilterModel,
    settings: ExplainSettings,
    rng: np.random.Generator,
) -> VariantExplanation:
    group = group.sort_values(["node", "trial", "run_id"])
    notes: list[str] = []
    mine = pages[pages["run_id"].isin(group["run_id"])]
    by_run = dict(tuple(mine.groupby("run_id", sort=False)))
    with_pages = group[group["run_id"].isin(by_run.keys())].reset_index(drop=True)
    run_rows: list[RunAddresses] = []
    predicted: list[float] = []
    for row in with_pages.itertuples(index=False):
        p = by_run[row.run_id]
        extra: dict[str, Any] = {}
        if model is not None:
            lines, threads = run_lines(p, configs.get(row.run_id))
            try:
                est = estimate(model, sf, lines, threads)
            except AddressRangeError as exc:
                raise AddrInputError(
                    f"trial {row.trial} of {variant} on {row.node} (run {row.run_id}): {exc}; the model does "
                    "not cover this node's memory"
                ) from None
            extra = {
                "lines": est.lines,
                "slice_imbalance": est.slice_imbalance,
                "set_imbalance": est.set_imbalance,
                "predicted_eviction": est.predicted_eviction,
            }
            predicted.append(est.predicted_eviction)
        run_rows.append(
            RunAddresses(
                run_id=str(row.run_id),
                node=str(row.node),
                trial=int(row.trial),
                perf_ratio=float(row.perf_ratio),
                slow=bool(row.slow),
                pages=len(p),
                **extra,
            )
        )
    slow = with_pages["slow"].to_numpy(dtype=bool)
    strata = pd.factorize(with_pages["node"])[0]
    frame_bits, candidates, best, findings, conflict = None, 0, None, (), None
    if len(with_pages) < len(group):
        notes.append(
            f"{len(group) - len(with_pages)} trials have no recorded physical pages (pagemap needs root)"
        )
    if slow.sum() < 3 or (~slow).sum() < 3:
        notes.append(
            f"{int(slow.sum())} slow and {int((~slow).sum())} normal trials with pages: too few to search"
        )
    else:
        frames = [by_run[r]["physical_address"].to_numpy(np.uint64) for r in with_pages["run_id"]]
        frame_bit = int(mine["page_size"].min()).bit_length() - 1
        frame_bits, candidates, best, findings = parity_search(frames, slow, strata, frame_bit, settings, rng)
        if model is not None:
            conflict = conflict_test(np.array(predicted), slow, strata, settings, rng)
    return VariantExplanation(
        variant=variant,
        probe=str(group["probe"].iloc[0]),
        trials=len(group),
        slow=int(group["slow"].sum()),
        trials_with_pages=len(with_pages),
        frame_bits=frame_bits,
        candidates=candidates,
        permutations=settings.permutations,
        best=best,
        findings=findings,
        conflict=conflict,
        runs=tuple(run_rows),
        notes=tuple(notes),
    )


def render(result: Explanation) -> str:
    """The plain-text report of `tailscope addr explain`."""
    out = [
        f"campaign {result.campaign}: address dependence of slow trials "
        f"(slow = more than {result.settings['threshold']:.0%} below the node median)"
    ]
    out.append(
        f"model: {result.model or 'none'}; parities of up to {result.settings['order']} frame bits, "
        f"{result.settings['permutations']} permutations, alpha {result.settings['alpha']}"
    )
    for note in result.notes:
        out.append(f"note: {note}")
    for v in result.variants:
        out.append("")
        out.append(f"{v.variant}: {v.trials} trials, {v.slow} slow, {v.trials_with_pages} with pages")
        for note in v.notes:
            out.append(f"  note: {note}")
        if v.best is not None and v.frame_bits is not None:
            lo, hi = v.frame_bits
            out.append(f"  searched {v.candidates} parities of frame bits {lo}..{hi}")
            if v.findings:
                for f in v.findings:
                    out.append(
                        f"  FOUND parity of bits {'^'.join(map(str, f.bits))}: "
                        f"odd on {f.odd_fraction_slow:.0%} of "
                        f"slow trials' pages vs {f.odd_fraction_normal:.0%} of normal ones, z = {f.z:+.2f}, "
                        f"adjusted p = {f.p_adjusted:.4f}"
                    )
            else:
                b = v.best
                out.append(
                    f"  no address-bit parity separates slow from normal trials (best: bits "
                    f"{'^'.join(map(str, b.bits))}, z = {b.z:+.2f}, "
                    f"adjusted p = {b.p_adjusted:.3f} > {result.settings['alpha']})"
                )
        if v.conflict is not None:
            c = v.conflict
            verdict = "higher" if c.p_value <= result.settings["alpha"] else "not clearly higher"
            out.append(
                f"  predicted snoop-filter conflict is {verdict} for slow trials: "
                f"AUC {c.auc:.2f}, z = {c.z:+.2f}, "
                f"p = {c.p_value:.4f}"
            )
        modelled = [r for r in v.runs if r.predicted_eviction is not None]
        if modelled:
            slow_r = [r for r in modelled if r.slow]
            norm_r = [r for r in modelled if not r.slow]

            def med(rows: list[RunAddresses], attr: str) -> str:
                vals = [getattr(r, attr) for r in rows]
                return f"{np.median(vals):.3f}" if vals else "-"

            out.append(
                f"  median slice imbalance slow {med(slow_r, 'slice_imbalance')} / "
                f"normal {med(norm_r, 'slice_imbalance')}; "
                f"(slice, set) imbalance {med(slow_r, 'set_imbalance')} / {med(norm_r, 'set_imbalance')}"
            )
            ranked = sorted(modelled, key=lambda r: -(r.predicted_eviction or 0.0))[:5]
            out.append("  page sets ranked by predicted conflict (lines evicted / resident):")
            for r in ranked:
                out.append(
                    f"    {r.node} trial {r.trial}: {r.predicted_eviction:.2%} "
                    f"({'slow' if r.slow else 'normal'}, ratio {r.perf_ratio:.3f})"
                )
    return "\n".join(out)
