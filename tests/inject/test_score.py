"""The scoring math on synthetic schedules and synthetic `analyze --json` documents with known answers."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from scipy.stats import binomtest

from tailscope.inject.kinds import KINDS
from tailscope.inject.score import clopper_pearson, ranked_causes, score, validation_rows
from tailscope.inject.validate import make_schedule
from tailscope.store.schema import TABLES


def run(
    trial: int, ratio: float, slow: bool, causes: list[tuple[str, float]] | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {
        "run_id": f"r{trial}",
        "node": "n1",
        "variant": "stream-x",
        "trial": trial,
        "perf_ratio": ratio,
        "slowdown": 1 - ratio,
        "slow": slow,
    }
    if causes is not None:
        r["causes"] = [{"cause": c, "score": s, "evidence": {}} for c, s in causes]
    return r


def inj(first: int, last: int, kind: str, intensity: float) -> dict[str, Any]:
    return {
        "node": "n1",
        "variant": "stream-x",
        "trial_first": first,
        "trial_last": last,
        "kind": kind,
        "intensity": intensity,
        "expected_cause": KINDS[kind].expected_cause,
    }


def test_known_answer_document() -> None:
    # clean 0-9 (one flagged slow), cpuoccupy 0.5 on 10-13, os-noise 5000 on 14-17, weak membw on 18-19
    runs = [run(t, 1.0 + 0.001 * t, False) for t in range(9)]
    runs.append(run(9, 0.93, True, [("unknown", 0.4)]))  # a false positive
    runs += [
        run(10, 0.60, True, [("cpu-contention", 0.9), ("os-noise", 0.2)]),
        run(11, 0.55, True, [("os-noise", 0.8), ("cpu-contention", 0.7)]),  # right at top-2 only
        run(12, 0.62, False, []),  # missed: not flagged, no causes: predicts none
        run(13, 0.58, True, [("cpu-contention", 0.1), ("memory-pressure", 0.5)]),  # ranked by score
        run(14, 0.80, True, [("os-noise", 0.6)]),
        run(15, 0.81, True, [("os-noise", 0.6)]),
        run(16, 0.95, False),  # slowed by < 10%: not scored
        run(17, 0.79, True, []),
        run(18, 0.99, False),
        run(19, 1.0, False),
    ]
    s = score(
        {"runs": runs},
        [inj(10, 13, "cpuoccupy", 0.5), inj(14, 17, "os-noise", 5000), inj(18, 19, "membw", 0.3)],
        reference_window=None,  # the campaign-wide clean median
    )
    assert s["clean"]["trials"] == 10 and s["clean"]["successes"] == 1
    assert s["clean"]["rate"] == pytest.approx(0.1)
    # placebo: trial 9 (0.93) is the slowest clean run, 7% below the clean runs around it: under 10%
    assert s["placebo"]["successes"] == 0 and s["placebo"]["trials"] == 10
    cells = {(d["kind"], d["intensity"]): d for d in s["detection"]}
    cpu = cells[("cpuoccupy", 0.5)]
    assert (cpu["runs"], cpu["effective"], cpu["successes"]) == (4, 4, 3)
    noise = cells[("os-noise", 5000.0)]
    assert (noise["runs"], noise["effective"], noise["successes"]) == (4, 3, 3)
    weak = cells[("membw", 0.3)]
    assert (weak["effective"], weak["rate"], weak["ci"]) == (0, None, None)
    assert cells[("os-noise", None)]["trials"] == 3  # the kind's row sums its intensities
    # clean perf_ratios 0.93, 1.000 ... 1.008: median (1.003 + 1.004) / 2; trial 10 is 1 - 0.60/1.0035
    t10 = next(r for r in s["runs"] if r["trial"] == 10)
    assert t10["slowdown"] == pytest.approx(1 - 0.60 / 1.0035)
    causes = {c["expected_cause"]: c for c in s["causes"]}
    # cpu-contention: trial 10 top-1, 11 top-2, 12 none (not slow), 13 memory-pressure first by score
    assert causes["cpu-contention"]["top1"]["successes"] == 1
    assert causes["cpu-contention"]["top2"]["successes"] == 3
    assert causes["cpu-contention"]["top1"]["trials"] == 4
    assert causes["os-noise"]["top1"]["successes"] == 2 and causes["os-noise"]["top1"]["trials"] == 3
    rows = s["confusion"]["rows"]
    assert rows["cpu-contention"] == {"cpu-contention": 1, "os-noise": 1, "none": 1, "memory-pressure": 1}
    assert rows["os-noise"] == {"os-noise": 2, "none": 1}
    assert rows["none"] == {"unknown": 1}
    assert s["causes_available"] and s["notes"] == []


def test_flags_at_the_slow_threshold_part_the_nodes_noise_from_tailscopes_own_false_alarms() -> None:
    # 20 clean runs at 1.0 except: trial 5 really 7% slower (flagged: the node's noise, backed by its
    # neighbours), trial 12 2% slower but flagged (an own false alarm), trial 15 6% slower and not flagged
    runs = [run(t, 1.0, False) for t in range(20)]
    runs[5] = run(5, 0.93, True, [("memory-bandwidth-contention", 0.5)])
    runs[12] = run(12, 0.98, True, [("unknown", 0.1)])
    runs[15] = run(15, 0.94, False)
    s = score({"runs": runs}, [])
    assert s["flag_threshold"] == 0.05  # analyze's default primary threshold when the settings are absent
    assert (s["clean"]["successes"], s["clean"]["trials"]) == (2, 20)
    assert s["placebo"]["successes"] == 0  # nothing 10% slower
    assert s["placebo_flag"]["successes"] == 2  # trials 5 and 15: >= 5% slower than their neighbours
    assert s["unbacked"]["successes"] == 1  # trial 12 only
    # the analysis' own threshold is the flag threshold: at 8%, trial 5 (7%) is no longer backed
    s8 = score({"runs": runs, "settings": {"thresholds": [0.08, 0.12]}}, [])
    assert s8["flag_threshold"] == 0.08
    assert (s8["placebo_flag"]["successes"], s8["unbacked"]["successes"]) == (0, 2)
    measures = {r["measure"]: r for r in validation_rows(s)}
    assert measures["unbacked_flag_rate"]["successes"] == 1
    assert measures["placebo_rate_flag"]["successes"] == 2
    # with the kernel's accounting the quiet figures part them too
    outside = {f"r{t}": 0.0 for t in range(20)} | {"r5": 0.2}
    q = score({"runs": runs}, [], outside=outside)
    assert (q["placebo_flag_quiet"]["successes"], q["placebo_flag_quiet"]["trials"]) == (1, 19)
    assert q["unbacked_quiet"]["successes"] == 1
    assert {"placebo_rate_flag_quiet", "unbacked_flag_rate_quiet"} <= {
        r["measure"] for r in validation_rows(q)
    }
    # a slow stretch of the node (seen after memthrash: 12 clean runs 10-15% low together): each is as slow as
    # its neighbours, but slower than the clean median, so its flag is backed, not a false alarm
    stretch = [run(t, 0.88 if 20 <= t < 32 else 1.0, 20 <= t < 32) for t in range(60)]
    s = score({"runs": stretch}, [])
    assert s["clean"]["successes"] == 12 and s["placebo_flag"]["successes"] < 12
    assert s["unbacked"]["successes"] == 0


def test_local_reference_follows_a_drifting_clean_baseline() -> None:
    # clean at 1.0, then the machine gets busier and clean runs sit at 0.6; each injection is ~12% below the
    # clean runs around it. A campaign-wide median (0.8) would miss the first and inflate the second.
    runs = [run(t, 1.0, False) for t in [*range(0, 10), *range(14, 24)]]
    runs += [run(t, 0.88, True) for t in range(10, 14)]
    runs += [run(t, 0.6, False) for t in [*range(24, 34), *range(38, 48)]]
    runs += [run(t, 0.52, True) for t in range(34, 38)]
    injections = [inj(10, 13, "cpuoccupy", 0.2), inj(34, 37, "cpuoccupy", 0.5)]
    local = {r["trial"]: r["slowdown"] for r in score({"runs": runs}, injections)["runs"]}
    assert local[10] == pytest.approx(0.12) and local[35] == pytest.approx(1 - 0.52 / 0.6)
    cells = {d["intensity"]: d for d in score({"runs": runs}, injections)["detection"]}
    assert cells[0.2]["effective"] == 4 and cells[0.5]["effective"] == 4
    wide = {
        r["trial"]: r["slowdown"] for r in score({"runs": runs}, injections, reference_window=None)["runs"]
    }
    assert wide[10] == pytest.approx(1 - 0.88 / 0.8) and wide[35] == pytest.approx(1 - 0.52 / 0.8)


def test_no_causes_yet_is_said_and_counts_as_none() -> None:
    runs = [run(t, 1.0, False) for t in range(6)] + [run(6, 0.5, True), run(7, 0.5, True)]
    s = score({"runs": runs}, [inj(6, 7, "cpuoccupy", 0.8)])
    assert not s["causes_available"]
    assert "no `causes`" in s["notes"][0]
    assert s["confusion"]["rows"] == {"cpu-contention": {"none": 2}}
    assert s["detection"][0]["rate"] == 1.0


def test_clopper_pearson_matches_scipy_exact_interval() -> None:
    for k, n in ((0, 10), (3, 10), (10, 10), (47, 50), (1, 200)):
        ci = clopper_pearson(k, n, 0.95)
        ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert ci == pytest.approx((ref.low, ref.high), abs=1e-9)
    assert clopper_pearson(0, 0) is None
    low, high = clopper_pearson(19, 20, 0.95)  # type: ignore[misc]
    assert low < 0.95 < high and high < 1.0


def test_ranked_causes_sorts_by_score_and_keeps_ties_in_order() -> None:
    r = run(0, 0.5, True, [("a", 0.2), ("b", 0.9), ("c", 0.2)])
    assert ranked_causes(r) == ["b", "a", "c"]


def test_node_verdicts_are_read_where_present() -> None:
    doc = {"runs": [run(0, 1.0, False)], "nodes": [{"node": "n1", "verdict": "degraded", "reasons": ["x"]}]}
    assert score(doc, [])["nodes"] == [{"node": "n1", "verdict": "degraded", "reasons": ["x"]}]


def test_validation_rows_fit_the_table() -> None:
    runs = [run(t, 1.0, t == 3, [("unknown", 1.0)] if t == 3 else None) for t in range(6)]
    runs += [run(6, 0.5, True, [("cpu-contention", 1.0)])]
    rows = validation_rows(score({"runs": runs}, [inj(6, 6, "cpuoccupy", 0.5)]))
    measures = {r["measure"] for r in rows}
    assert measures == {
        "false_positive_rate",
        "placebo_rate",
        "placebo_rate_flag",
        "unbacked_flag_rate",
        "recall",
        "top1",
        "top2",
        "confusion",
    }
    import pyarrow as pa

    table = pa.Table.from_pylist(
        [
            {**r, "campaign": "c", "task": "t", "scored_at": __import__("datetime").datetime.now()}
            for r in rows
        ],
        schema=TABLES["validation"].schema,
    )
    assert table.num_rows == len(rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_schedule_is_balanced_reproducible_and_separated_by_clean_blocks(seed: int) -> None:
    kinds = [KINDS["cpuoccupy"], KINDS["os-noise"], KINDS["membw"]]
    blocks = make_schedule(200, 4, 0.5, kinds, random.Random(seed))
    assert blocks == make_schedule(200, 4, 0.5, kinds, random.Random(seed))
    assert sum(b.size for b in blocks) == 200
    assert [b.position for b in blocks] == [4 * i for i in range(50)]
    injected = [b for b in blocks if b.kind is not None]
    assert len(injected) == 25
    for a, b in itertools.pairwise(blocks):
        assert a.kind is None or b.kind is None  # never two injected blocks in a row at fraction 0.5
    counts: dict[tuple[str, float], int] = {}
    for b in injected:
        counts[(b.kind.name, b.intensity)] = counts.get((b.kind.name, b.intensity), 0) + 1  # type: ignore[union-attr]
    assert len(counts) == 9 and max(counts.values()) - min(counts.values()) <= 1


def test_quiet_figures_leave_out_runs_that_outside_work_disturbed() -> None:
    # clean 0-9: run 3 flagged while another job took 30% of the probe CPUs (real interference, not a
    # false alarm of tailscope), run 7 flagged on a quiet trial; cpuoccupy on 10-13, run 12 disturbed.
    runs = [run(t, 1.0, False) for t in range(10)]
    runs[3] = run(3, 0.7, True, [("cpu-contention", 1.0)])
    runs[7] = run(7, 0.85, True, [("unknown", 0.0)])
    runs += [run(t, 0.5, True, [("cpu-contention", 1.0)]) for t in (10, 11, 13)]
    runs.append(run(12, 0.5, True, [("os-noise", 1.0)]))
    outside = {f"r{t}": 0.0 for t in range(14)} | {"r3": 0.30, "r12": 0.08}
    s = score({"runs": runs}, [inj(10, 13, "cpuoccupy", 0.5)], outside=outside)
    assert (s["clean"]["successes"], s["clean"]["trials"]) == (2, 10)
    assert (s["clean_quiet"]["successes"], s["clean_quiet"]["trials"]) == (1, 9)
    assert (s["placebo_quiet"]["successes"], s["placebo_quiet"]["trials"]) == (1, 9)  # run 7: 15% slower
    (all_runs,) = s["causes"]
    (quiet,) = s["causes_quiet"]
    assert (all_runs["top1"]["successes"], all_runs["top1"]["trials"]) == (3, 4)
    assert (quiet["top1"]["successes"], quiet["top1"]["trials"]) == (3, 3)
    measures = {r["measure"] for r in validation_rows(s)}
    assert {"false_positive_rate_quiet", "placebo_rate_quiet", "top1_quiet", "placebo_rate"} <= measures
    # without the kernel's accounting nothing is called quiet, and no quiet rows are stored
    s = score({"runs": runs}, [inj(10, 13, "cpuoccupy", 0.5)])
    assert s["clean_quiet"]["trials"] == 0 and not s["outside_known"]
    assert not any(r["measure"].endswith("_quiet") for r in validation_rows(s))


def test_causes_found_by_elimination_are_also_scored_as_a_pair() -> None:
    # cachecopy runs on a bandwidth-bound victim: named memory-bandwidth-contention (or cache-contention)
    runs = [run(t, 1.0, False) for t in range(8)]
    runs += [run(8, 0.6, True, [("memory-bandwidth-contention", 0.4)])]
    runs += [run(9, 0.6, True, [("cache-contention", 0.35)])]
    runs += [run(10, 0.6, True, [("cpu-contention", 0.9), ("cache-contention", 0.3)])]
    runs += [run(11, 0.6, True, [("memory-bandwidth-contention", 0.4)])]
    s = score({"runs": runs}, [inj(8, 10, "cachecopy", 0.6), inj(11, 11, "membw", 0.6)])
    by = {c["expected_cause"]: c for c in s["causes"]}
    assert by["cache-contention"]["top1"]["successes"] == 1  # strict: only run 9
    (pair,) = s["causes_pooled"]
    assert pair["expected_cause"] == "cache-contention or memory-bandwidth-contention"
    assert (pair["top1"]["successes"], pair["top1"]["trials"]) == (3, 4)  # runs 8, 9, 11
    assert (pair["top2"]["successes"], pair["top2"]["trials"]) == (4, 4)
    assert any("cannot be told apart here" in n for n in s["notes"])
    assert {"top1_pooled", "top2_pooled"} <= {r["measure"] for r in validation_rows(s)}
