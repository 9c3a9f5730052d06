"""Attribution over a synthetic ensemble: a counter that drives the slow runs ranks first, random "
"ones do not."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from tailscope.analysis.attribution import rank_counters
from tailscope.analysis.model import Settings
from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES
from tailscope.verbs.workflow import analyze_campaign

SEED = 20261123
CORES = 4
START = pd.Timestamp("2026-11-02T10:00:00", tz="UTC")


def build_campaign(
    root: Path, seed: int = SEED, nodes: int = 3, trials: int = 120, random_counters: int = 12
) -> dict:
    """Bandwidth runs (higher is better); 2% slow ones whose L2 fills (per core) rose; noise counters."""
    print(f"synthetic ensemble seed {seed}")
    rng = np.random.default_rng(seed)
    campaign = Campaign.create(root)
    slow_ids = []
    for n in range(nodes):
        node = f"n{n}"
        node_median = 100.0 * (1.0 + 0.08 * n)
        runs, counters = [], []
        for t in range(trials):
            run_id = uuid.uuid4().hex
            slow = rng.random() < 0.03
            slowdown = rng.uniform(0.12, 0.40) if slow else 0.0
            value = node_median * (1.0 - slowdown) * (1.0 + rng.normal(0.0, 0.004))
            if slow:
                slow_ids.append(run_id)
            runs.append(
                {
                    "run_id": run_id, "campaign": campaign.campaign_id, "node": node, "probe": "l2sum",
                    "variant": "l2sum-x", "params": "{}", "trial": t,
                    "started_at": START + pd.Timedelta(seconds=10 * t),
                    "metric": "bandwidth", "value": value, "unit": "GB/s", "higher_is_better": True,
                    "status": "ok", "source": "probe", "task": "t",
                    "seconds": 1.0 / (1.0 - slowdown), "threads": CORES,
                }
            )  # fmt: skip
            # Normal runs: L2 fills vary 2x (seed Fig. 4); slow runs: far above that range.
            for core in range(CORES):
                fills = rng.uniform(1e6, 2e6) + (slowdown * 4e7 * rng.uniform(0.5, 1.5) if slow else 0.0)
                counters.append(("cpu", core, "L2_LINES_IN.ALL", fills))
                counters.append(("cpu", core, "INST_RETIRED.ANY", 1e9 * (1 + rng.normal(0, 0.001))))
            for k in range(random_counters):
                counters.append(("cpu", 0, f"RANDOM_{k}", float(rng.lognormal(10, 1))))
            counters = [
                c
                if isinstance(c, dict)
                else {
                    "run_id": run_id,
                    "source": "perf",
                    "pmu": c[0],
                    "unit": c[1],
                    "event": c[2],
                    "value": c[3],
                }
                for c in counters
            ]
        tables = {
            "runs": pa.Table.from_pylist(runs, schema=TABLES["runs"].schema),
            "counters": pa.Table.from_pylist(counters, schema=TABLES["counters"].schema),
        }
        with load_into(campaign.root, "test") as load:
            load.write_tables(tables, node=node)
    return {"slow": slow_ids}


def test_driving_counter_ranks_first_and_random_counters_do_not(tmp_path: Path) -> None:
    truth = build_campaign(tmp_path / "c")
    analysis = analyze_campaign(tmp_path / "c", Settings())
    section = analysis.attribution
    assert section is not None
    (variant,) = section["variants"]
    assert variant["slow_runs"] >= 3
    ranked = variant["counters"]
    assert ranked[0]["counter"] == "cpu/L2_LINES_IN.ALL", [r["counter"] for r in ranked[:3]]
    assert ranked[0]["q_value"] < 1e-3 and ranked[0]["rank_biserial"] > 0.9
    # The outlier view is where the correlation shows (99% of normal runs hide it).
    assert ranked[0]["outlier_view_r2"] > ranked[0]["r2"]
    randoms = [r for r in ranked if r["counter"].startswith("cpu/RANDOM_")]
    assert len(randoms) == 12
    assert all(r["q_value"] > 0.05 for r in randoms), [(r["counter"], r["q_value"]) for r in randoms]
    # Excess over the ensemble minimum: slow runs far above normal ones.
    assert ranked[0]["slow_excess_median"] > 5 * ranked[0]["normal_excess_median"]
    # Each slow run on its own: its most abnormal counter is the driving one.
    per_run = variant["slow_run_counters"]
    assert {r["run_id"] for r in per_run} <= set(truth["slow"]) and len(per_run) == variant["slow_runs"]
    assert all(r["abnormal"][0]["counter"] == "cpu/L2_LINES_IN.ALL" for r in per_run)
    # Slow/good pairs, per core (seed Figs. 5-6): slow trial above the good one on every core.
    pair = variant["pairs"][0]
    assert pair["slow_run"] in truth["slow"]
    per_core = pair["counters"]["cpu/L2_LINES_IN.ALL"]
    assert per_core["units"] == list(range(CORES))
    assert all(s > g for s, g in zip(per_core["slow"], per_core["good"], strict=True))
    assert pair["good_perf_ratio"] >= 1.0 and pair["good_trial"] < pair["slow_trial"]


def test_analyze_json_has_attribution(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_campaign(tmp_path / "c", trials=40, nodes=1, random_counters=2)
    capsys.readouterr()
    main(["analyze", str(tmp_path / "c"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["attribution"]["variants"][0]["counters"][0]["counter"]
    assert "attribution" in doc["methods"]


def test_rank_counters_without_slow_runs_uses_correlation_only() -> None:
    rng = np.random.default_rng(SEED)
    ratio = 1.0 - rng.uniform(0, 0.02, 50)
    table = pd.DataFrame(
        {"a": 1.0 / ratio + rng.normal(0, 1e-4, 50), "b": rng.normal(size=50), "c": np.ones(50)}
    )
    scores = rank_counters(table, ratio, np.zeros(50, dtype=bool))
    assert next(s.counter for s in scores) == "a"
    assert "c" not in [s.counter for s in scores]  # constant counters are left out
    assert scores[0].q_value is None and scores[0].spearman_rho > 0.9


def test_os_interference_from_reference_cycles_and_tsc() -> None:
    """Seed III: the sum of unhalted reference cycles over a core's threads above the elapsed TSC cycles
    means a second thread (the OS) ran on the probe's cores."""
    from tailscope.analysis.attribution import interference, run_features

    rows = []
    for r in range(10):
        busy = 1.3 if r == 7 else 0.99  # run 7: the sibling threads were busy 30% of the time
        for cpu in range(4):
            rows.append({"run_id": f"r{r}", "source": "perf", "pmu": "cpu", "unit": cpu,
                         "event": "ref-cycles", "value": busy * 1e9 / 4 * 2})  # fmt: skip
        rows.append(
            {"run_id": f"r{r}", "source": "perf", "pmu": "msr", "unit": None, "event": "tsc", "value": 1e9}
        )
    counters = pd.DataFrame(rows)
    runs = pd.DataFrame({"run_id": [f"r{r}" for r in range(10)], "seconds": 0.5, "threads": 2})
    table = run_features(counters, runs)
    assert table.loc["r7", "derived/threads_per_core"] == pytest.approx(1.3)
    info = pd.DataFrame({"slow": [r == 7 for r in range(10)]}, index=table.index)
    check = interference(table, info, 3.5)
    assert check is not None and check["counter"] == "derived/threads_per_core"
    assert check["flagged_runs"] == ["r7"] and check["slow_flagged"] == 1
