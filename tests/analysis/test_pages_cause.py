"""page-placement backed by the pages test (addr explain's permutation test) through the workflow."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
from evidence_fixtures import Trial, evidence_rows

from tailscope.analysis.model import Settings
from tailscope.store.campaign import Campaign, utcnow
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES
from tailscope.verbs.workflow import analyze_campaign

PLANTED = (23, 29)
LIMIT = 1 << 38
PAGE = 2 << 20


def _parity(address: int) -> int:
    return sum((address >> b) & 1 for b in PLANTED) % 2


def _table(rows: list[dict], name: str) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TABLES[name].schema)


def _campaign(root, rng, *, planted: bool):
    """160 trials of l2sum with 2 pages each; slow (every iteration 15% low) iff both pages have odd
    parity of bits 23 and 29 (planted) or at random with the same rate (not planted). Quiet evidence."""
    campaign = Campaign.create(root)
    runs, pages, iterations, counters = [], [], [], []
    for trial in range(160):
        frames = rng.choice(LIMIT // PAGE, size=2, replace=False).astype(np.int64) * PAGE
        slow = all(_parity(int(f)) for f in frames) if planted else rng.random() < 0.25
        level = 100.0 * (0.85 if slow else 1.0)
        values = level * (1.0 + rng.normal(0.0, 0.002, 10))
        run_id = f"r{trial}"
        runs.append({
            "run_id": run_id, "campaign": campaign.campaign_id, "node": "n1", "probe": "l2sum",
            "variant": "l2sum-p", "params": '{"page": "2m"}', "trial": trial, "page_policy": "2m",
            "started_at": utcnow() + dt.timedelta(seconds=trial), "metric": "bandwidth",
            "value": float(values.mean()), "unit": "GB/s", "higher_is_better": True, "status": "ok",
            "source": "probe", "task": "t",
        })  # fmt: skip
        for i, f in enumerate(frames.tolist()):
            va = 0x7F0000000000 + i * PAGE
            pages.append({"run_id": run_id, "array": "data", "thread": None, "page_size": PAGE,
                          "virtual_address": va, "physical_address": int(f)})  # fmt: skip
        for i, v in enumerate(values.tolist()):
            iterations.append({"run_id": run_id, "iteration": i, "thread": None, "kernel": None, "cpu": None,
                               "warmup": False, "seconds": 1.0 / v, "value": v})  # fmt: skip
        counters += evidence_rows(run_id, Trial())[0]
    tables = {
        "runs": _table(runs, "runs"),
        "pages": _table(pages, "pages"),
        "iterations": _table(iterations, "iterations"),
        "counters": _table(counters, "counters"),
    }
    with load_into(campaign.root, "test") as load:
        load.write_tables(tables, node="n1")
    return root


def _page_causes(analysis):
    flagged = [r for r in analysis.runs if r.slow]
    assert flagged and all(r.kind == "systematic" for r in flagged)
    return [r.causes[0] for r in flagged]


def test_an_address_dependence_makes_page_placement_a_direct_finding(tmp_path):
    rng = np.random.default_rng(2026)
    analysis = analyze_campaign(_campaign(tmp_path / "c", rng, planted=True), Settings())
    tops = _page_causes(analysis)
    assert {c.cause for c in tops} == {"page-placement"}
    top = tops[0]
    assert top.score == 0.8 and top.confidence == "high"
    assert top.evidence["pages_test_bits"] == list(PLANTED)
    assert "ties slowness to the parity of physical address bits [23, 29]" in top.sentence
    assert "snoop" not in top.mitigation.lower()  # the fixture's node has no facts: no vendor claim


def test_no_address_dependence_leaves_page_placement_weak(tmp_path):
    rng = np.random.default_rng(7)
    analysis = analyze_campaign(_campaign(tmp_path / "c", rng, planted=False), Settings())
    tops = _page_causes(analysis)
    placement = [c for r in analysis.runs if r.slow for c in r.causes if c.cause == "page-placement"]
    assert placement and all(c.score == 0.15 and c.confidence == "low" for c in placement)
    assert "the pages test found no address dependence" in placement[0].sentence
    # Weak page evidence now ranks below cache contention by elimination (l2sum is cache-bound).
    assert {c.cause for c in tops} == {"cache-contention"}


def test_only_a_runs_best_explanation_calls_for_the_pages_test_and_the_sweep() -> None:
    from types import SimpleNamespace as Run

    from tailscope.analysis.causes.page_placement import variants_it_explains

    def cause(name: str) -> Run:
        return Run(cause=name)

    runs = [
        Run(variant="a", causes=(cause("cache-contention"), cause("page-placement"))),  # second: a busy node
        Run(variant="b", causes=(cause("page-placement"),)),
        Run(variant="c", causes=()),
    ]
    assert variants_it_explains(runs) == {"b"}
    assert variants_it_explains(runs[:1]) == set()
