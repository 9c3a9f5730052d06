"""html.py: the report's content from hand-made analysis results (no statistics code involved); figures are
checked through their Plotly specs (JSON), drawing in a browser by test_browser*.py."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from report_builders import (
    CHECKS,
    HOSTILE,
    NOTES,
    demo_analysis,
    group,
    iterations_frame,
    nodes_frame,
    render,
    run_verdict,
    team_iterations,
    thread_iterations,
    variant_summary,
)

from tailscope.analysis.model import CampaignAnalysis, Settings, Verdict
from tailscope.report.html import select_timeline_runs
from tailscope.report.markup import esc
from tailscope.report.plotly_figures import plotly_js


def specs(html: str) -> list[tuple[str, str, dict]]:
    """(figure, variant, Plotly spec) of every figure, in page order."""
    out = []
    for fid, figure, variant in re.findall(
        r'<div class="plot" id="(plot\d+)" data-figure="([^"]+)" data-variant="([^"]*)"', html
    ):
        text = re.search(rf'<script type="application/json" id="{fid}-spec">(.*?)</script>', html).group(1)
        out.append((figure, variant, json.loads(text)))
    return out


def figures_of(html: str) -> list[tuple[str, str]]:
    return [(f, v) for f, v, _ in specs(html)]


@pytest.fixture(scope="module")
def html() -> str:
    return render()


def test_the_answer_comes_first(html):
    assert "<title>tailscope report: demo</title>" in html
    verdict = html.index('<section id="verdict"')
    assert verdict < html.index('<nav id="toc">') < html.index('<div class="plot"')
    # The box says the worst node verdict (analysis.nodes) and is red, never green above a failing check
    # (issue 14): n1 failed its limit, the hostile node is healthy.
    assert "Verdict: DEGRADED (1 degraded, 1 healthy)" in html
    assert '<section id="verdict" class="verdict v-degraded">' in html
    answer = html[verdict : html.index('<nav id="toc">')]
    # n1's line names its causes, as the analysis ranked them.
    assert 'n1</b>: <span class="bad">degraded: cpu-contention, page-placement</span>' in answer
    # The causes of the flagged runs, grouped across probes, with the evidence of the best-explained run.
    assert "Causes of the flagged runs" in answer
    causes = re.findall(r'<li data-cause="([^"]+)">', answer)
    assert causes == ["cpu-contention", "page-placement"]
    assert "stress-ng (pid 4242) took 41% of CPU 0" in answer
    assert "What to do:</i> what to do about cpu-contention" in answer
    # The checks: the failed one first, with its message; the passed one after it.
    assert "Checks: 1 of 2 failed" in html
    assert html.index("2 of 10 runs were slow") < html.index("CV 0.5%; limit 2%: passed")
    # Every term used is explained once, beside the verdict.
    for term in ("slow =", "systematic =", "transient =", "! ="):
        assert answer.count(term) == 1
    notes = re.search(r'<ol class="notes">(.*?)</ol>', html, flags=re.DOTALL).group(1)
    assert re.findall(r"<li>(.*?)</li>", notes) == [esc(n) for n in NOTES]  # all findings, escaped


def test_table_of_contents_links_every_section(html):
    toc = re.search(r'<nav id="toc">(.*?)</nav>', html, flags=re.DOTALL).group(1)
    anchors = re.findall(r'href="#([^"]+)"', toc)
    assert anchors[:2] == ["v1", "v2"]  # the probes first (fwq, l2sum by name)
    for anchor in anchors:
        assert f'id="{anchor}"' in html
    assert ">fwq note=" in toc and ">l2sum note=" in toc  # human names (page thp is the default), no hash


def test_figures_per_variant(html):
    figs = figures_of(html)
    assert sorted(f for f, v in figs if v == "l2sum-1a2b" and f != "timeline") == [
        "ecdf",
        "nodes",  # two nodes: the per-node min/median/max (the seed's Fig. 9)
        "sorted",
        "time",
    ]
    assert sorted(f for f, v in figs if v == "fwq-9f9f" and f != "timeline") == ["ecdf", "sorted", "time"]
    # The library once, the drawing script once.
    assert html.count("<script>") == 2


def test_sorted_figure_has_every_run_and_the_thresholds(html):
    ((spec),) = [s for f, v, s in specs(html) if f == "sorted" and v == "l2sum-1a2b"]
    points = [(c, y) for t in spec["data"] for c, y in zip(t["customdata"], t["y"], strict=True)]
    assert len(points) == 20
    slow = next(t for t in spec["data"] if t["name"].startswith("slow"))
    assert slow["name"] == "slow (2)"
    assert slow["customdata"][0][:3] == ["n1", 3, "page-placement"]  # slowest first (0.88), its top cause
    assert (
        "node %{customdata[0]}" in slow["hovertemplate"] and "trial %{customdata[1]}" in slow["hovertemplate"]
    )
    labels = [a["text"] for a in spec["layout"]["annotations"]]
    assert labels == ["median", "5% slower", "10% slower"]
    assert spec["layout"]["yaxis"]["type"] == "linear"  # 88 to 100: no log axis


def test_time_figure_marks_slow_runs_per_node(html):
    ((spec),) = [s for f, v, s in specs(html) if f == "time" and v == "l2sum-1a2b"]
    names = [t["name"] for t in spec["data"]]
    assert names[-1] == "slow (2)" and len(names) == 3  # one trace per node, then the slow runs
    assert spec["layout"]["xaxis"]["type"] == "date"
    assert all(isinstance(x, int) for t in spec["data"] for x in t["x"])  # epoch milliseconds


def test_timelines_of_the_selected_slow_runs(html):
    drawn = [s for f, _, s in specs(html) if f == "timeline"]
    titles = sorted(s["layout"]["title"]["text"] for s in drawn)
    assert titles == ["n1 trial 2: iterations", "n1 trial 3: iterations", "n1 trial 7: iterations"]
    (fwq,) = [s for f, v, s in specs(html) if f == "timeline" and v == "fwq-9f9f"]
    # fwq has no team record: the slowest of its 2 threads (the highest time) is drawn.
    assert [t["name"] for t in fwq["data"]] == [
        "typical trial 0 (slowest of 2 threads)",
        "slow trial 2 (slowest of 2 threads)",
    ]
    assert fwq["data"][1]["y"][0] == 125
    # No classifier reference on the fwq run: the slow threshold above the typical run's median (times).
    assert [a["text"] for a in fwq["layout"]["annotations"]] == ["5% slower than the typical median"]
    # A run whose evidence carries the classifier's reference: the lines are the label's own (issue 14).
    (l2,) = [
        s
        for f, v, s in specs(html)
        if f == "timeline" and s["layout"]["title"]["text"] == "n1 trial 3: iterations"
    ]
    assert [a["text"] for a in l2["layout"]["annotations"]] == [
        "typical iteration (the label's reference)",
        "low iteration: more than 6% below it",
    ]
    assert [sh["y0"] for sh in l2["layout"]["shapes"]] == [100.0, 94.0]


def test_numbers_are_formatted(html):
    assert "95.12 [94.98, 95.20] GB/s" in html
    assert ">4.1%<" in html  # CV 0.0412
    assert ">2/10!<" in html and ">1/10<" in html  # the tail-count test rejects at 5%
    assert "p = 0.0043" in html
    assert "1 systematic, 1 transient" in html
    assert ">1 (1)<" not in html and ">10 (1)<" in html  # runs (failed)


def test_slow_runs_table_lists_the_slowest_first(html):
    section = html[html.index('data-variant="l2sum-1a2b"') :]
    table = re.search(r"Slow runs of l2sum[^(]*\(2\)</summary>.*?</table>", section, flags=re.DOTALL).group(0)
    rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.DOTALL)[1:]
    assert [re.findall(r"<td[^>]*>(.*?)</td>", r)[1] for r in rows] == ["3", "7"]
    # Each slow run's top cause with its confidence and shape, and that cause's evidence in its own words.
    assert "page-placement (low); systematic, 20 of 20 iterations low" in table
    assert "cpu-contention (high); transient, 2 of 20 iterations low" in table
    assert ">stress-ng (pid 4242) took 41% of CPU 0<" in table
    assert ">12%<" in table and ">7%<" in table


def test_nothing_is_fetched(html):
    markup = re.sub(r"<script\b.*?</script>", "", html, flags=re.DOTALL)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", markup, flags=re.IGNORECASE)
    assert "default-src 'none'" in html  # the page may not fetch anything even if a URL slipped in
    assert "script-src 'unsafe-inline'" in html


def test_hostile_node_name_is_escaped(html):
    assert HOSTILE not in html
    markup = re.sub(r"<script>.*?</script>", "", html, flags=re.DOTALL)  # the library's own code
    assert "<script>alert" not in markup
    assert esc(HOSTILE) in html
    # In the figures it round-trips as data, and no "<" is left inside a JSON script element.
    ((nodes),) = [s for f, _, s in specs(html) if f == "nodes"]
    assert HOSTILE in [c[0] for trace in nodes["data"] for c in trace["customdata"]]
    for body in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', html, flags=re.DOTALL):
        assert "<" not in body


def test_probe_specific_numbers(html):
    section = html[html.index('data-variant="fwq-9f9f"') :]
    table = re.search(r"Probe-specific numbers</h3>(.*?)</table>", section, flags=re.DOTALL).group(1)
    assert (
        "<th>noise_fraction_median</th><th>noise_period_s_median</th><th>noise_rate_per_s_median</th>"
        in table
    )
    assert '<td class="num">1.1%</td><td class="num">4 ms</td><td class="num">2.5/s</td>' in table
    assert "noise_rule: &lt;rule&gt;" in section


def test_node_facts_latest_row_and_differences(html):
    section = html[html.index('<section id="nodes">') :]
    assert ">0x2<" in section and ">0x1<" not in section  # n1's earlier collection is not current
    # Up to 8 nodes, one column per node (sorted: "<" before "n"); a row whose nodes disagree is marked.
    assert f"<th>fact</th><th>{esc(HOSTILE)}</th><th>n1</th>" in section
    assert '<td>l2_bytes</td><td class="differ">2 MiB</td><td class="differ">1 MiB</td>' in section
    assert '<td>microcode</td><td class="differ">0x3</td><td class="differ">0x2</td>' in section
    differ = re.search(r"Facts that differ between nodes \((\d+)\)", section)
    assert differ.group(1) == "2"  # microcode and thp; cpu.model agrees
    assert "0x2: n1; 0x3: " + esc(HOSTILE) in section or "0x3: " + esc(HOSTILE) + "; 0x2: n1" in section
    assert esc("<always>") in section
    assert "cpu.model" in section


def test_missing_fact_values_show_a_dash():
    nodes = nodes_frame(
        [
            dict(node="n1", collected_at="2026-11-02T08:00:00Z", cores=4, facts={}),
            dict(node="n2", collected_at="2026-11-02T08:00:00Z", cores=None, facts={}),
        ]
    )
    nodes["cores"] = nodes["cores"].astype("Int32")  # as DuckDB returns a nullable integer column
    section = render(nodes=nodes).split('<section id="nodes">')[1].split("</section>")[0]
    assert '<td>cores</td><td class="differ">4</td><td class="differ">-</td>' in section
    assert "&lt;NA&gt;" not in section and "nan" not in section


def test_invalid_facts_json_is_shown_not_fatal():
    nodes = nodes_frame([dict(node="n1", collected_at="2026-11-02T08:00:00Z", facts="{not json")])
    page = render(nodes=nodes)
    assert "not valid JSON (Expecting property name enclosed in double quotes at character 1)" in page


def test_missing_tables_are_said_plainly():
    page = render(nodes=pd.DataFrame(), iterations=pd.DataFrame())
    assert "No node facts were recorded in this campaign." in page
    assert "No iterations stored for the slow run or its typical run" in page
    assert 'data-figure="timeline"' not in page


def test_rendering_is_deterministic():
    assert render() == render()


def test_every_figure_spec_is_json(html):
    assert len(specs(html)) == 10  # 4 + 3 figures, 3 timelines; json.loads parsed each


def test_one_run_and_equal_values_render():
    runs = (run_verdict("dgemm-0001", "n1", 0, 1.0, unit="GFLOPS"),)
    g = group("dgemm-0001", "n1", n=1, ci=(None, None), cv=None, minimum=100.0, maximum=100.0, unit="GFLOPS")
    analysis = CampaignAnalysis(
        campaign="c1",
        settings=Settings(),
        variants=(variant_summary("dgemm-0001", nodes=1, n=1, unit="GFLOPS"),),
        groups=(g,),
        runs=runs,
        verdict=Verdict(True, ()),
        notes=(),
    )
    page = render(analysis, iterations=pd.DataFrame())
    assert "100.0 [no CI, n=1] GFLOPS" in page
    assert "Verdict: INCONCLUSIVE (no node had ok runs to judge)" in page
    assert '<section id="verdict" class="verdict v-inconclusive">' in page
    assert "No slow runs among 1." in page
    assert len(specs(page)) == 3


def test_empty_analysis_renders():
    analysis = CampaignAnalysis(
        "c1", Settings(), (), (), (), Verdict(True, ()), ("campaign c1: no runs to analyse",)
    )
    page = render(analysis, nodes=pd.DataFrame(), iterations=pd.DataFrame())
    assert "Verdict: INCONCLUSIVE (no node had ok runs to judge)" in page
    assert "campaign c1: no runs to analyse" in page
    assert "<script>" not in page  # no figure: no library


def test_select_timeline_runs_caps_and_order():
    # One variant, two nodes: n1 has 9 slow runs, n2 has 8; caps: 6 per node, 12 per variant.
    runs = []
    for t in range(20):
        runs.append(run_verdict("l2sum-1a2b", "n1", t, 0.80 + 0.01 * t if t < 9 else 1.0 + 0.001 * (t - 12)))
        runs.append(
            run_verdict("l2sum-1a2b", "n2", t, 0.805 + 0.01 * t if t < 8 else 1.0 - 0.0005 * (t - 10))
        )
    analysis = CampaignAnalysis("c", Settings(), (), (), tuple(runs), Verdict(True, ()), ())
    picked = select_timeline_runs(analysis)
    assert list(picked) == [("l2sum-1a2b", "n1"), ("l2sum-1a2b", "n2")]
    # Typical run first (ratio closest to 1: n1 trial 12, n2 trial 10), then slowest first.
    assert picked[("l2sum-1a2b", "n1")] == ["l2sum-1a2b:n1:12"] + [f"l2sum-1a2b:n1:{t}" for t in range(6)]
    # 12 per variant: the 12 slowest across both nodes are n1 0-5 and n2 0-5 (n1 6 at 0.86 > n2 5 at 0.855).
    assert picked[("l2sum-1a2b", "n2")] == ["l2sum-1a2b:n2:10"] + [f"l2sum-1a2b:n2:{t}" for t in range(6)]
    # A node without slow runs is not drawn.
    quiet = CampaignAnalysis(
        "c", Settings(), (), (), (run_verdict("v-1", "n3", 0, 1.0),), Verdict(True, ()), ()
    )
    assert select_timeline_runs(quiet) == {}


def test_report_size_for_4_variants_200_runs():
    """4 variants x 1 node x 200 runs, 10 slow runs each, every drawn run's iterations: well under 3 MB."""
    variants, groups, runs = [], [], []
    plan = {"l2sum-0001": (100, None, True), "stream-0002": (10, "stream", True),
             "dgemm-0003": (10, None, True), "fwq-0004": (5000, "fwq", False)}  # fmt: skip
    for name, (_, _, hib) in plan.items():
        variants.append(variant_summary(name, nodes=1, n=200, higher_is_better=hib))
        groups.append(group(name, "n1", n=200, k5=10, higher_is_better=hib))
        for t in range(200):
            ratio = 0.85 + 0.005 * t if t < 10 else 1.0 + 0.0001 * ((t * 37) % 100 - 50)
            runs.append(
                run_verdict(name, "n1", t, ratio, higher_is_better=hib, kind="systematic" if t < 10 else None)
            )
    analysis = CampaignAnalysis(
        "big", Settings(), tuple(variants), tuple(groups), tuple(runs), Verdict(True, ()), ()
    )
    wanted = {i for ids in select_timeline_runs(analysis).values() for i in ids}
    assert len(wanted) == 4 * 7  # 6 slow + 1 typical per variant
    rows = []  # what the CLI loads from the store: the iterations of the wanted runs only
    for run in (r for r in runs if r.run_id in wanted):
        n_it, kind, _ = plan[run.variant]
        if kind == "stream":
            for k in ("copy", "scale", "add", "triad"):
                rows += team_iterations(run.run_id, [run.value] * n_it, warmup=1.0, kernel=k)
        elif kind == "fwq":  # 8 threads x 5000 samples, a 50 us spike every 97 samples
            rows += thread_iterations(run.run_id, [[run.value + (i % 97 == 0) * 50 for i in range(n_it)]] * 8)
        else:
            rows += team_iterations(run.run_id, [run.value] * n_it, warmup=1.0)
    page = render(analysis, iterations=iterations_frame(rows))
    library = len(plotly_js().encode())
    assert len(page.encode()) - library < 3_000_000
    timelines = [s for f, _, s in specs(page) if f == "timeline"]
    assert len(timelines) == 24
    for spec in timelines:
        for trace in spec["data"]:
            assert len(trace["y"]) <= 2000  # thinned: 5000 fwq samples become <= 2000 points


def test_a_masked_part_is_a_caveat_with_its_inference(host_root):
    """The nodes' recorded facts of issue 31's masked KVM guest (tests/hosts/granite-rapids-masked-kvm.toml):
    the answer's caveat says the part was inferred, from what, and which node; a bare-metal node adds none."""
    from tailscope.node.facts import cpu_facts

    masked = cpu_facts(host_root("granite-rapids-masked-kvm"))
    metal = cpu_facts(host_root("icelake-sp-5318y-2s"))
    nodes = nodes_frame([
        dict(node="vm1", collected_at="2026-11-02T08:00:00Z", virtualization="kvm", facts=masked),
        dict(node="n2", collected_at="2026-11-02T08:00:00Z", virtualization="none", facts=metal),
    ])  # fmt: skip
    caveat = render(nodes=nodes).split('<aside class="caveat">')[1].split("</aside>")[0]
    assert "Virtual machine: part inferred: likely Intel Xeon 6 (Granite Rapids)" in caveat
    assert "L3 480 MiB" in caveat and "(node vm1)" in caveat and "n2" not in caveat


def test_a_stopped_checks_claims_are_listed_escaped():
    """A check stopped when settled lists what its confidence sequences claim, in the verdict box."""
    import dataclasses

    from tailscope.analysis.model import Claim

    level = "stream within 1.8% of its history"
    rate = "l2sum slow-run rate <b>below</b> 5%"
    claims = (
        Claim("stream", "stream-1", "n1", "level", "within", 0.018, 0.95, 4, level),
        Claim("l2sum", "l2sum-1", HOSTILE, "slow_rate", "below", 0.05, 0.95, 60, rate),
    )
    page = render(dataclasses.replace(demo_analysis(checks=CHECKS, notes=NOTES), claims=claims))
    start = page.index('<section id="verdict"')
    box = page[start : page.index("</section>", start)]
    assert "<h3>Claims (anytime-valid" in box and box.count("<li data-claim=") == 2
    assert "stream within 1.8% of its history" in box and "&lt;b&gt;below&lt;/b&gt;" in box
    assert "<h3>Claims" not in render()  # a campaign of fixed trial counts claims nothing
