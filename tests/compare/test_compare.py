"""Variants compared as an experiment: rates, Clopper-Pearson intervals, Fisher's exact test, the median
shift and the sentence, on a campaign written through the store with tails known in advance; and a live
`run --page thp,4k` that interleaves its variants and a report that draws both."""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy.stats import binomtest

from store_tools import stored
from tailscope.analysis.model import Settings
from tailscope.cli import main
from tailscope.compare import compare
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES
from tailscope.verbs.workflow import analyze_campaign, write_report

BASE = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def _values(n: int, slow: int, median: float, seed: int) -> list[float]:
    """n values within +-1.5% of `median`, `slow` of them 20% below it (a known tail)."""
    rng = np.random.default_rng(seed)
    values = median * (1.0 + rng.uniform(-0.015, 0.015, n))
    values[rng.choice(n, size=slow, replace=False)] = median * 0.8
    return values.tolist()


def write_variants(root: Path, arms: list[tuple[ProbeVariant, list[float]]], node: str = "n1") -> Path:
    """One campaign holding the arms' runs on one node, interleaved trial by trial as the runner runs them."""
    with load_into(root, "test", create=True, name="pages") as load:
        load.write_tables({"runs": _runs_table(load.campaign_id, arms, node)}, node=node)
        for variant, values in arms:
            load.add_plan(variant.to_plan(len(values)))
    return root


def _runs_table(campaign_id: str, arms: list[tuple[ProbeVariant, list[float]]], node: str) -> pa.Table:
    rows = []
    for k, (variant, values) in enumerate(arms):
        for trial, value in enumerate(values):
            rows.append(
                {
                    "run_id": uuid.uuid4().hex,
                    "campaign": campaign_id,
                    "node": node,
                    "probe": variant.probe,
                    "variant": variant.variant_id,
                    "params": variant.params_json,
                    "trial": trial,
                    "page_policy": variant.page_policy,
                    "started_at": BASE + dt.timedelta(seconds=2 * trial + k),
                    "wall_s": 0.5,
                    "metric": "bandwidth",
                    "value": value,
                    "unit": "GB/s",
                    "higher_is_better": True,
                    "status": "ok",
                    "source": "probe",
                    "task": "t1",
                }
            )
    return pa.Table.from_pylist(rows, schema=TABLES["runs"].schema)


def fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Fisher's exact test by its definition: the hypergeometric tables at most as likely as the observed."""
    row1, col1, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col1, x) * math.comb(n - col1, row1 - x) / math.comb(n, row1)

    observed = prob(a)
    lo, hi = max(0, row1 + col1 - n), min(row1, col1)
    return sum(prob(x) for x in range(lo, hi + 1) if prob(x) <= observed * (1 + 1e-9))


@pytest.fixture(scope="module")
def pages_campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp") / "pages"
    arms = [
        (ProbeVariant("l2sum", {"page_policy": "2m"}), _values(100, 7, 100.0, seed=1)),
        (ProbeVariant("l2sum", {"page_policy": "1g"}), _values(100, 0, 102.0, seed=2)),
    ]
    return write_variants(root, arms)


def test_rates_intervals_fisher_and_sentence(pages_campaign):
    analysis = analyze_campaign(pages_campaign, Settings())
    (c,) = compare(analysis)
    assert c.option == "page_policy"
    ref, cand = c.arms
    assert (ref.label, ref.slow, ref.n) == ("2 MiB pages", 7, 100)
    assert (cand.label, cand.slow, cand.n) == ("1 GiB pages", 0, 100)
    for arm in c.arms:  # Clopper-Pearson, checked against scipy's exact binomial interval
        ci = binomtest(arm.slow, arm.n).proportion_ci(0.95, method="exact")
        assert arm.rate_low == pytest.approx(ci.low, abs=1e-9)
        assert arm.rate_high == pytest.approx(ci.high, abs=1e-9)
    (k,) = c.contrasts
    assert k.fisher_p == pytest.approx(fisher_two_sided(0, 100, 7, 93), rel=1e-9)
    assert k.fisher_p == pytest.approx(0.0137, abs=5e-4)
    assert k.effect == "removes the tail"
    assert k.sentence.startswith(
        "1 GiB pages: 0 of 100 runs slow vs 7 of 100 with 2 MiB pages, p = 0.014: "
        "the page policy removes the tail"
    )
    # 102 vs 100 GB/s: the median is 2% higher and the interval says so.
    assert k.median_shift == pytest.approx(0.02, abs=0.006)
    assert 0 < k.shift_low < k.median_shift < k.shift_high


def test_no_difference_is_said_with_what_the_sample_could_see(tmp_path):
    root = write_variants(
        tmp_path / "c",
        [
            (ProbeVariant("l2sum", {"page_policy": "2m"}), _values(60, 2, 100.0, seed=3)),
            (ProbeVariant("l2sum", {"page_policy": "1g"}), _values(60, 1, 100.0, seed=4)),
        ],
    )
    (c,) = compare(analyze_campaign(root, Settings()))
    (k,) = c.contrasts
    assert k.effect == "no difference shown"
    assert k.fisher_p == pytest.approx(fisher_two_sided(1, 59, 2, 58), rel=1e-9)
    assert "no evidence" in k.sentence and "with 60 runs per variant" in k.sentence


def test_compare_verb_prints_the_sentence_and_json(pages_campaign, capsys):
    assert main(["compare", str(pages_campaign)]) == 0
    out = capsys.readouterr().out
    assert "the page policy removes the tail" in out
    assert "2 MiB pages" in out and "(reference)" in out
    assert main(["compare", str(pages_campaign), "--by", "page_policy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["arms"][1]["slow"] == 0 and data[0]["contrasts"][0]["effect"] == "removes the tail"
    assert main(["compare", str(pages_campaign), "--by", "offset"]) == 2
    assert "no probe has two or more variants differing in offset" in capsys.readouterr().err


def test_offset_sweep_is_one_comparison_against_offset_zero(tmp_path):
    arms = [
        (ProbeVariant("l2sum", {"page_policy": "1g", "offset": off}), _values(40, slow, 100.0, seed=i))
        for i, (off, slow) in enumerate((("64m", 12), ("0", 0), ("16m", 1)))
    ]
    root = write_variants(tmp_path / "sweep", arms)
    (c,) = compare(analyze_campaign(root, Settings()), "offset")
    assert [a.value for a in c.arms] == ["0", "16m", "64m"]  # the default (0) is the reference
    assert [a.label for a in c.arms] == ["offset +0", "offset +16m", "offset +64m"]
    worst = c.contrasts[-1]
    assert worst.effect == "adds a tail" and worst.fisher_p < 0.001


def test_variants_are_what_the_probe_runs():
    assert ProbeVariant("l2sum").variant_id == ProbeVariant("l2sum", {"page_policy": "thp"}).variant_id
    assert ProbeVariant("l2sum", {"offset": "64M"}).name == "l2sum +64m"
    assert ProbeVariant("l2sum", {"page_policy": "1g", "offset": str(64 << 20)}).name == "l2sum 1g +64m"
    assert ProbeVariant("dgemm", {"n": 2000, "calls": 20}).name == "dgemm calls=20"


FAST = ["--chunk-bytes", "256k", "--sums", "40", "--sums-per-iteration", "4", "--cpus", "0"]


def test_run_page_list_interleaves_and_the_report_draws_both(tmp_path, capsys):
    root = tmp_path / "live"
    code = main(
        ["run", "l2sum", "--page", "thp,4k", "--trials", "6", "--campaign", str(root), "--no-progress", *FAST]
    )
    assert code in (0, 1), capsys.readouterr().err
    order = stored(root, "SELECT page_policy FROM runs ORDER BY started_at")
    assert [p for (p,) in order] == ["thp", "4k"] * 6
    analysis = analyze_campaign(root, Settings())
    # one name from --page to the report: the parameter, the stored column (the default thp too), the model
    assert sorted(str(v.params.get("page_policy")) for v in analysis.variants) == ["4k", "None"]
    assert {v.page_policy for v in analysis.variants} == {"thp", "4k"}
    (tmp_path / "r").mkdir()
    report = write_report(root, analysis, tmp_path / "r" / "report.html")
    html = report.read_text()
    assert 'data-figure="compare"' in html and "transparent huge pages" in html and "4 KiB pages" in html
    assert html.count("page policy thp;") == 1 and html.count("page policy 4k;") == 1  # each variant's line
    assert html.count('data-figure="sorted"') == 2
    assert (tmp_path / "r" / "report-runs.csv").read_text().count("\n") == 13


def test_a_plan_stored_with_a_default_keeps_its_variant_id():
    """Campaigns planned before defaults were dropped (`--page thp` hashed into the id) still resume."""
    old = {"variant": "l2sum-x", "probe": "l2sum", "params": {"page": "thp"}, "trials": 3}
    restored = ProbeVariant.from_plan(old["probe"], old["params"])
    assert restored.params == {"page_policy": "thp"}  # read under today's name ...
    assert restored.variant_id == "l2sum-57c8f829"  # ... with the id it was stored under
    assert restored.variant_id != ProbeVariant("l2sum").variant_id
    assert restored.argv()[-2:] == ["--page", "thp"]
    plan = ProbeVariant("l2sum", {"page_policy": "1g"}).to_plan(3)
    assert plan.params == {"page_policy": "1g"}
    assert ProbeVariant.from_plan(plan.probe, plan.params) == ProbeVariant("l2sum", {"page_policy": "1g"})


def test_renaming_the_page_parameter_keeps_every_variant_id():
    """The page policy was stored as params["page"] and variant ids hash the params: ids of campaigns stored
    then (sha1 of 'probe:' + sorted params JSON under the old spelling) are the ids of today's variants, so
    an old campaign resumes into the same variants and its plans still match its runs."""
    import hashlib

    def old_id(probe: str, params_json: str) -> str:
        return f"{probe}-{hashlib.sha1(f'{probe}:{params_json}'.encode()).hexdigest()[:8]}"

    assert ProbeVariant("l2sum", {"page_policy": "4k"}).variant_id == old_id("l2sum", '{"page":"4k"}')
    assert ProbeVariant("l2sum", {"page_policy": "4k"}).variant_id == "l2sum-f102cbe5"
    both = ProbeVariant("l2sum", {"page_policy": "2m", "offset": "64m"})
    assert both.variant_id == old_id("l2sum", '{"offset":67108864,"page":"2m"}') or both.variant_id == old_id(
        "l2sum", '{"offset":"64m","page":"2m"}'
    )
    assert ProbeVariant("l2sum", {"page": "1g"}) == ProbeVariant("l2sum", {"page_policy": "1g"})


def test_an_old_campaign_resumes_into_its_variants(tmp_path):
    """A campaign stored before the rename (plans and runs.params with "page") resumes: the new trials join
    the old variant, analyze reads one variant with page_policy 4k, nothing is planned twice."""
    from tailscope.node.facts import node_name

    root = tmp_path / "old"
    arm = ProbeVariant("l2sum", {"page_policy": "4k"})
    with load_into(root, "test", create=True, name="old") as load:
        table = _runs_table(load.campaign_id, [(arm, _values(2, 0, 100.0, seed=5))], node_name())
        rows = table.to_pylist()
        for r in rows:
            r["params"] = '{"page":"4k"}'  # as stored before the rename
        old = pa.Table.from_pylist(rows, schema=TABLES["runs"].schema)
        load.write_tables({"runs": old}, node=node_name())
    doc = json.loads((root / "campaign.json").read_text())
    doc["plans"] = [{"variant": arm.variant_id, "probe": "l2sum", "params": {"page": "4k"}, "trials": 3}]
    (root / "campaign.json").write_text(json.dumps(doc))
    assert main(["run", "--resume", "--campaign", str(root), "--no-progress"]) in (0, 1)
    analysis = analyze_campaign(root, Settings())
    (v,) = analysis.variants
    assert (v.variant, v.params, v.page_policy, v.n) == (arm.variant_id, {"page_policy": "4k"}, "4k", 3)
