"""How often tailscope is right: score `analyze --json` against the recorded injection schedule.

Inputs are plain data so the math is testable without running anything:
- `analysis`: the `analyze --json` object. Per run it reads `run_id`, `node`, `variant`, `trial`,
  `perf_ratio`, `slow` and, when the cause catalogue provides them, `causes` =
  [{"cause", "score", "evidence"}] (ranked; re-sorted here by score, highest first).
  Per node it reads `verdict` and `reasons` where present.
- `injections`: rows of the `injections` table (node, variant, trial_first, trial_last, kind, intensity,
  expected_cause). A run outside every row is a clean run.

Definitions (all over the runs of this campaign, per node and variant):
- A run's *injected slowdown* is 1 - perf_ratio / (median perf_ratio of the `reference_window` clean runs of
  its node and variant nearest to it in trial order; None: all of them): how much slower than clean it
  really was, whatever tailscope's own reference is. The local reference follows slow drifts of a shared
  machine's load, which a campaign-wide median does not.
- *Detected*: analyze flagged the run slow (its `slow`, at the primary threshold).
- *Recall* per injector and intensity: detected / injected runs whose injected slowdown >= `threshold`
  (default 10%). Runs an injection did not slow that much are counted (`runs`, `effective`) but not scored.
- *False-positive rate*: clean runs flagged slow / clean runs.
- *Placebo rate*: clean runs whose slowdown against the clean runs around them (themselves left out) is
  >= `threshold`: how often run-to-run noise alone would count as an effective injection. When it is not
  far below 1, the recall and cause figures measure the node's noise as much as tailscope.
- The false-positive rate counts flags at analyze's own (primary) slow threshold, `flag_threshold` (5% by
  default, from the analysis' settings), which is usually below the scoring `threshold`. So two more figures
  part a node's noise from tailscope's own mistakes: the *placebo at the flag threshold* (clean runs at
  least `flag_threshold` slower than the clean runs around them: the false-positive rate a perfect flag would
  have on this node) and the *unbacked flags* (clean runs flagged slow although they were less than
  `flag_threshold` slower than the clean runs around them and than the median of all the clean runs: false
  alarms of tailscope itself, whatever the node's noise; a slow stretch of the node, which moves the local
  reference with it, backs its runs' flags through the campaign-wide median).
- *Top-1 / top-2 cause accuracy* per expected cause: effective injected runs whose first (first two) ranked
  causes include the injector's expected cause; a run with no causes predicts `none` (the catalogue gives
  causes to flagged runs only: slow, or a robust outlier).
- *Confusion matrix*: expected cause (rows; `none` = clean runs flagged slow) x top-1 predicted cause.
- *Quiet* figures (`clean_quiet`, `placebo_quiet`, `causes_quiet`): the same over the runs in which nothing
  from outside the schedule took `quiet_limit` (5%) or more of the probe CPUs, as the kernel counted it
  (`outside`: /proc/stat's others and steal, less the injector's own time; validate.outside_shares). The
  issue's false-positive target is for clean trials of a quiet node; on a shared node the other figures
  count real interference from other work as false positives, and both are reported.
Intervals are Clopper-Pearson (exact binomial) at `confidence`.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tailscope.analysis import binomial
from tailscope.analysis.model import Settings
from tailscope.inject.kinds import CAUSES

NONE = "none"
# Causes found only by elimination without a PMU: nothing in /proc or /sys tells one from the other, so on a
# node without hardware counters their accuracy is also given for the pair (`causes_pooled`), never claimed
# for each alone. With a PMU, cache-miss and memory-controller counts would part them.
ALIKE_WITHOUT_PMU = (frozenset({"cache-contention", "memory-bandwidth-contention"}),)
QUIET_LIMIT = 0.05  # a run is quiet when less than this share of the probe CPUs went to outside work


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The analysis' exact binomial interval (analysis/binomial.py), None when n = 0."""
    return binomial.clopper_pearson(k, n, confidence) if n else None


def _rate(k: int, n: int, confidence: float) -> dict[str, Any]:
    ci = clopper_pearson(k, n, confidence)
    return {
        "successes": k,
        "trials": n,
        "rate": k / n if n else None,
        "ci": list(ci) if ci else None,
    }


def ranked_causes(run: Mapping[str, Any]) -> list[str]:
    causes = run.get("causes") or []
    ordered = sorted(causes, key=lambda c: -float(c.get("score", 0.0)))  # stable: ties keep their order
    return [str(c["cause"]) for c in ordered]


def _injection_of(injections: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, int], Mapping[str, Any]]:
    out: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for inj in injections:
        for trial in range(int(inj["trial_first"]), int(inj["trial_last"]) + 1):
            out[(str(inj["node"]), str(inj["variant"]), trial)] = inj
    return out


def _reference(clean: list[tuple[int, float]], trial: int, window: int | None) -> float | None:
    """Median perf_ratio of the `window` clean runs nearest to `trial` (clean: sorted by trial)."""
    if not clean:
        return None
    if window is None or window >= len(clean):
        return statistics.median(r for _, r in clean)
    i = bisect.bisect_left(clean, (trial, -math.inf))
    lo, hi, picked = i - 1, i, []
    while len(picked) < window:
        if hi < len(clean) and (lo < 0 or clean[hi][0] - trial <= trial - clean[lo][0]):
            picked.append(clean[hi][1])
            hi += 1
        else:
            picked.append(clean[lo][1])
            lo -= 1
    return statistics.median(picked)


def _flag_threshold(analysis: Mapping[str, Any]) -> float:
    """analyze's primary slow threshold, from the analysis' settings (the default when it has none)."""
    given = (analysis.get("settings") or {}).get("thresholds") or Settings().thresholds
    return float(given[0])


def _node_verdicts(analysis: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per-node verdicts wherever `analyze --json` puts them (a `nodes` list, or on groups)."""
    out = []
    for key in ("nodes", "groups"):
        for item in analysis.get(key) or []:
            if isinstance(item, Mapping) and "verdict" in item and isinstance(item["verdict"], str):
                out.append(
                    {"node": item.get("node"), "verdict": item["verdict"], "reasons": item.get("reasons", [])}
                )
        if out:
            break
    return out


def score(
    analysis: Mapping[str, Any],
    injections: Sequence[Mapping[str, Any]],
    *,
    threshold: float = 0.10,
    confidence: float = 0.95,
    reference_window: int | None = 8,
    outside: Mapping[str, float] | None = None,
    quiet_limit: float = QUIET_LIMIT,
    alike: Sequence[frozenset[str]] = ALIKE_WITHOUT_PMU,
) -> dict[str, Any]:
    runs: Iterable[Mapping[str, Any]] = analysis.get("runs") or []
    outside = outside or {}
    by_trial = _injection_of(injections)
    runs = list(runs)
    clean: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for r in runs:
        if (str(r["node"]), str(r["variant"]), int(r["trial"])) not in by_trial:
            clean[(str(r["node"]), str(r["variant"]))].append((int(r["trial"]), float(r["perf_ratio"])))
    for v in clean.values():
        v.sort()
    causes_available = any("causes" in r for r in runs)
    unknown_names: set[str] = set()
    flag_threshold = _flag_threshold(analysis)
    clean_median = {key: statistics.median(r for _, r in rows) for key, rows in clean.items() if rows}

    clean_n = clean_flagged = placebo = placebo_flag = unbacked = 0
    quiet: Counter[str] = Counter()
    det: dict[tuple[str, float], Counter[str]] = defaultdict(Counter)
    slowdowns: dict[tuple[str, float], list[float]] = defaultdict(list)
    top1: dict[str, Counter[str]] = defaultdict(Counter)
    top1_quiet: dict[str, Counter[str]] = defaultdict(Counter)
    pooled: dict[str, Counter[str]] = defaultdict(Counter)
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    per_run = []
    for r in runs:
        node, variant, trial = str(r["node"]), str(r["variant"]), int(r["trial"])
        inj = by_trial.get((node, variant, trial))
        slow = bool(r.get("slow"))
        predicted = ranked_causes(r)  # the catalogue gives causes to flagged runs only
        unknown_names.update(c for c in predicted if c not in CAUSES)
        first = predicted[0] if predicted else NONE
        pool = clean.get((node, variant), [])
        if inj is None:  # a clean run's own reference leaves it out (the placebo below)
            pool = [c for c in pool if c[0] != trial]
        ref = _reference(pool, trial, reference_window)
        slowdown = 1 - float(r["perf_ratio"]) / ref if ref else float(r.get("slowdown", 0.0))
        taken = outside.get(str(r.get("run_id")))
        is_quiet = taken is not None and taken < quiet_limit
        per_run.append(
            {
                "run_id": r.get("run_id"),
                "trial": trial,
                "kind": inj["kind"] if inj else None,
                "intensity": inj["intensity"] if inj else None,
                "slowdown": slowdown,
                "slow": slow,
                "top_cause": first,
                "outside": taken,
            }
        )
        if inj is None:
            clean_n += 1
            placebo += int(slowdown >= threshold)
            placebo_flag += int(slowdown >= flag_threshold)
            usual = clean_median.get((node, variant))
            below_usual = 1 - float(r["perf_ratio"]) / usual if usual else slowdown
            false_alarm = slow and max(slowdown, below_usual) < flag_threshold
            unbacked += int(false_alarm)
            if slow:
                clean_flagged += 1
                confusion[NONE][first] += 1
            if is_quiet:
                quiet["clean"] += 1
                quiet["flagged"] += int(slow)
                quiet["placebo"] += int(slowdown >= threshold)
                quiet["placebo_flag"] += int(slowdown >= flag_threshold)
                quiet["unbacked"] += int(false_alarm)
            continue
        cell = (str(inj["kind"]), float(inj["intensity"]))
        det[cell]["runs"] += 1
        slowdowns[cell].append(slowdown)
        if slowdown < threshold:
            continue
        det[cell]["effective"] += 1
        det[cell]["detected"] += int(slow)
        expected = str(inj["expected_cause"])
        top1[expected]["runs"] += 1
        top1[expected]["top1"] += int(first == expected)
        top1[expected]["top2"] += int(expected in predicted[:2])
        confusion[expected][first] += 1
        for group in alike:
            if expected in group:
                name = " or ".join(sorted(group))
                pooled[name]["runs"] += 1
                pooled[name]["top1"] += int(first in group)
                pooled[name]["top2"] += int(any(p in group for p in predicted[:2]))
        if is_quiet:
            top1_quiet[expected]["runs"] += 1
            top1_quiet[expected]["top1"] += int(first == expected)
            top1_quiet[expected]["top2"] += int(expected in predicted[:2])

    detection = []
    for kind in sorted({k for k, _ in det}):
        cells = sorted(i for k, i in det if k == kind)
        for intensity in [*cells, None]:
            keys = [(kind, i) for i in cells] if intensity is None else [(kind, intensity)]
            total: Counter[str] = sum((det[k] for k in keys), Counter())
            sd = [s for k in keys for s in slowdowns[k]]
            detection.append(
                {
                    "kind": kind,
                    "intensity": intensity,
                    "runs": total["runs"],
                    "effective": total["effective"],
                    "median_slowdown": statistics.median(sd) if sd else None,
                    **_rate(total["detected"], total["effective"], confidence),
                }
            )

    def cause_rows_of(counts: Mapping[str, Counter[str]]) -> list[dict[str, Any]]:
        return [
            {
                "expected_cause": expected,
                "top1": _rate(counts[expected]["top1"], counts[expected]["runs"], confidence),
                "top2": _rate(counts[expected]["top2"], counts[expected]["runs"], confidence),
            }
            for expected in sorted(counts)
        ]

    def of_quiet(count: str) -> dict[str, Any]:
        return {"runs": quiet["clean"], **_rate(quiet[count], quiet["clean"], confidence)}

    cause_rows = cause_rows_of(top1)
    labels = sorted({p for row in confusion.values() for p in row} | set(confusion))
    notes = []
    if not causes_available:
        notes.append(
            "analyze --json gave no `causes` for any run: cause accuracy counts every run as `none` "
            "(the cause catalogue is not wired into analyze yet)"
        )
    if pooled:
        notes.append(
            "without a PMU, "
            + "; ".join(" and ".join(sorted(g)) for g in alike)
            + " are found by elimination and cannot be told apart here: their accuracy is also given for "
            "the pair (either one named counts)"
        )
    if unknown_names:
        notes.append(f"causes outside the vocabulary: {', '.join(sorted(unknown_names))}")
    return {
        "threshold": threshold,
        "confidence": confidence,
        "reference_window": reference_window,
        "causes_available": causes_available,
        "clean": {"runs": clean_n, **_rate(clean_flagged, clean_n, confidence)},
        # clean runs >= threshold slower than the clean runs around them: what noise alone "injects"
        "placebo": {"runs": clean_n, **_rate(placebo, clean_n, confidence)},
        "flag_threshold": flag_threshold,
        # clean runs >= flag_threshold slower than their neighbours: the false positives of a perfect flag
        "placebo_flag": {"runs": clean_n, **_rate(placebo_flag, clean_n, confidence)},
        # clean runs flagged slow that neither their neighbours nor the clean median back: own false alarms
        "unbacked": {"runs": clean_n, **_rate(unbacked, clean_n, confidence)},
        "quiet_limit": quiet_limit,
        "outside_known": bool(outside),
        "clean_quiet": of_quiet("flagged"),
        "placebo_quiet": of_quiet("placebo"),
        "placebo_flag_quiet": of_quiet("placebo_flag"),
        "unbacked_quiet": of_quiet("unbacked"),
        "detection": detection,
        "causes": cause_rows,
        "causes_quiet": cause_rows_of(top1_quiet),
        "causes_pooled": cause_rows_of(pooled),
        "confusion": {
            "labels": labels,
            "rows": {e: {p: confusion[e][p] for p in labels if confusion[e][p]} for e in sorted(confusion)},
        },
        "nodes": _node_verdicts(analysis),
        "notes": notes,
        "runs": per_run,
    }


def validation_rows(scores: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The scores as rows of the `validation` table (without campaign, task, scored_at)."""
    conf = float(scores["confidence"])

    def row(measure: str, r: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
        ci = r.get("ci") or [None, None]
        base = {"kind": None, "intensity": None, "expected_cause": None, "predicted_cause": None}
        return {
            **base,
            "measure": measure,
            **kw,
            "successes": int(r["successes"]),
            "trials": int(r["trials"]),
            "rate": r.get("rate"),
            "ci_low": ci[0],
            "ci_high": ci[1],
            "confidence": conf,
        }

    rows = [row("false_positive_rate", scores["clean"])]
    if "placebo" in scores:
        rows.append(row("placebo_rate", scores["placebo"]))
    if "unbacked" in scores:
        rows.append(row("placebo_rate_flag", scores["placebo_flag"]))
        rows.append(row("unbacked_flag_rate", scores["unbacked"]))
    for c in scores.get("causes_pooled") or []:
        rows.append(row("top1_pooled", c["top1"], expected_cause=c["expected_cause"]))
        rows.append(row("top2_pooled", c["top2"], expected_cause=c["expected_cause"]))
    if scores.get("outside_known"):
        rows.append(row("false_positive_rate_quiet", scores["clean_quiet"]))
        rows.append(row("placebo_rate_quiet", scores["placebo_quiet"]))
        if "unbacked_quiet" in scores:
            rows.append(row("placebo_rate_flag_quiet", scores["placebo_flag_quiet"]))
            rows.append(row("unbacked_flag_rate_quiet", scores["unbacked_quiet"]))
        for c in scores["causes_quiet"]:
            rows.append(row("top1_quiet", c["top1"], expected_cause=c["expected_cause"]))
            rows.append(row("top2_quiet", c["top2"], expected_cause=c["expected_cause"]))
    rows += [row("recall", d, kind=d["kind"], intensity=d["intensity"]) for d in scores["detection"]]
    for c in scores["causes"]:
        rows.append(row("top1", c["top1"], expected_cause=c["expected_cause"]))
        rows.append(row("top2", c["top2"], expected_cause=c["expected_cause"]))
    for expected, cells in scores["confusion"]["rows"].items():
        n = sum(cells.values())
        for predicted, count in cells.items():
            rows.append(
                row(
                    "confusion",
                    {"successes": count, "trials": n, "rate": count / n, "ci": None},
                    expected_cause=expected,
                    predicted_cause=predicted,
                )
            )
    for r in rows:
        if r["rate"] is not None and not math.isfinite(r["rate"]):
            r["rate"] = None
    return rows
