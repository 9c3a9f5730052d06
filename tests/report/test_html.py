"""html.py: the report's content from hand-made analysis results (no statistics code involved)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pandas as pd
import pytest
from report_builders import (
    HOSTILE,
    NOTES,
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
from tailscope.report.svg import esc


def svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", html, flags=re.DOTALL)]


def figures_of(html: str) -> list[tuple[str, str]]:
    return [(s.get("data-figure"), s.get("data-variant")) for s in svgs(html)]


@pytest.fixture(scope="module")
def html() -> str:
    return render()


def test_title_verdict_and_notes(html):
    assert "<title>tailscope report: demo</title>" in html
    # The box says the worst node verdict and is red, never green above a failing check (issue 14).
    assert "Verdict: DEGRADED</span> (1 degraded, 1 healthy)" in html
    assert '<section id="verdict" class="verdict fail">' in html
    # Failed check first, with its message; the passed one after it.
    assert html.index("2 of 10 runs were slow") < html.index("CV 0.5%; limit 2%: passed")
    notes = re.search(r'<ol class="notes">(.*?)</ol>', html, flags=re.DOTALL).group(1)
    items = re.findall(r"<li>(.*?)</li>", notes)
    assert items == [esc(n) for n in NOTES]  # every note, in the analysis' order, escaped


def test_figures_per_variant(html):
    figs = figures_of(html)
    assert sorted(f for f, v in figs if v == "l2sum-1a2b" and f != "timeline") == [
        "ecdf",
        "histogram",
        "nodes",  # two nodes: the per-node min/median/max chart
        "sorted",
    ]
    assert sorted(f for f, v in figs if v == "fwq-9f9f" and f != "timeline") == [
        "ecdf",
        "histogram",
        "sorted",
    ]
    # Every figure has a plain-words caption next to it.
    assert html.count("<figcaption>") == len(figs)


def test_sorted_figure_has_every_run_and_the_thresholds(html):
    (sorted_l2sum,) = [
        s for s in svgs(html) if s.get("data-figure") == "sorted" and s.get("data-variant") == "l2sum-1a2b"
    ]
    ns = "{http://www.w3.org/2000/svg}"
    tips = [t.text for t in sorted_l2sum.iter(f"{ns}title")]
    point_tips = [t for t in tips if t.startswith("run ")]
    assert len(point_tips) == 20
    assert any(
        t.startswith("run l2sum-1a2b:n1:3\nnode n1, trial 3") and "slow (systematic)" in t for t in point_tips
    )
    assert "5% slower" in tips and "10% slower" in tips  # the two threshold lines
    # The slowest run is the first point: systematic trial 3 at ratio 0.88, drawn in the systematic colour.
    layers = {g.get("data-layer"): g for g in sorted_l2sum.iter(f"{ns}g") if g.get("data-layer")}
    assert layers["slow, systematic (1)"].get("fill") == "#D55E00"
    assert layers["normal (18)"] is not None and layers["slow, transient (1)"] is not None


def test_timelines_of_the_selected_slow_runs(html):
    drawn = sorted(s.get("data-run") for s in svgs(html) if s.get("data-figure") == "timeline")
    assert drawn == ["fwq-9f9f:n1:2", "l2sum-1a2b:n1:3", "l2sum-1a2b:n1:7"]
    assert "vs typical run l2sum-1a2b:n1:0" in html
    ns = "{http://www.w3.org/2000/svg}"
    (fwq,) = [s for s in svgs(html) if s.get("data-run") == "fwq-9f9f:n1:2"]
    labels = [t.text for t in fwq.iter(f"{ns}text")]
    # fwq has no team record: the slowest of its 2 threads (the highest time) is drawn.
    assert "slow trial 2 (slowest of 2 threads)" in labels
    assert "typical trial 0 (slowest of 2 threads)" in labels
    tips = [t.text for t in fwq.iter(f"{ns}title") if t.text.startswith("run ")]
    assert tips[0] == "run fwq-9f9f:n1:2, iteration 0: 125 us"
    # A run whose evidence carries the classifier's reference: the lines are the label's own (issue 14).
    l2 = [
        [t.text for t in s.iter(f"{ns}text")] for s in svgs(html) if s.get("data-run", "").startswith("l2sum")
    ]
    assert any(
        "typical iteration (the label's reference)" in labels
        and "low iteration: more than 6% below it" in labels
        for labels in l2
    )


def test_numbers_are_formatted(html):
    # Median with its interval at the median's decimals, CV, the tail counts, p-value, kinds.
    assert "95.12 [94.98, 95.20] GB/s" in html
    assert ">4.1%<" in html  # CV 0.0412
    assert ">2/10<" in html and ">1/10<" in html
    assert ">0.0043<" in html
    assert "1 systematic, 1 transient" in html
    assert "29 / 44 at observed rate 20%; 598 / 919 at given rate 0.5%" in html
    assert ">1 (1)<" not in html and ">10 (1)<" in html  # n (failed)
    assert "-1% (score -4.00)" in html  # the hostile node's median vs all nodes


def test_slow_run_ids_and_evidence_appear(html):
    section = html[html.index('data-variant="l2sum-1a2b"') :]
    table = re.search(r"Slow runs \(more than 5%.*?</table>", section, flags=re.DOTALL).group(0)
    assert table.index("l2sum-1a2b:n1:3") < table.index("l2sum-1a2b:n1:7")  # slowest first
    assert "20 of 20 iterations low; median iteration ratio 0.880, min 0.860, IQR 0.010" in table
    assert ">12%<" in table and ">7%<" in table
    assert "fwq-9f9f:n1:2" in html


def test_no_external_urls_and_no_script(html):
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.IGNORECASE)
    # The only http URL is the SVG namespace name (an identifier, never fetched).
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    assert "<script" not in html.lower()
    assert "default-src 'none'" in html  # the page may not fetch anything even if a URL slipped in


def test_hostile_node_name_is_escaped(html):
    assert HOSTILE not in html
    assert "alert(" not in html.replace(esc("alert('x')"), "")
    assert esc(HOSTILE) in html
    # In the SVG it round-trips as text, not markup.
    (nodes_chart,) = [s for s in svgs(html) if s.get("data-figure") == "nodes"]
    texts = [t.text for t in nodes_chart.iter("{http://www.w3.org/2000/svg}text")]
    assert HOSTILE in texts


def test_probe_specific_numbers(html):
    # fwq noise: per run in the slow-run table, per node in its own table; text values as explanations.
    assert "noise_events 3, noise_fraction 1.1%, noise_period_s 4 ms" in html
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
    section = render(nodes=nodes).split('<section id="nodes">')[1]
    assert '<td>cores</td><td class="differ">4</td><td class="differ">-</td>' in section
    assert "&lt;NA&gt;" not in section and "nan" not in section


def test_invalid_facts_json_is_shown_not_fatal():
    nodes = nodes_frame([dict(node="n1", collected_at="2026-11-02T08:00:00Z", facts="{not json")])
    page = render(nodes=nodes)
    assert "not valid JSON (Expecting property name enclosed in double quotes at character 1)" in page


def test_missing_tables_are_said_plainly():
    page = render(nodes=pd.DataFrame(), iterations=pd.DataFrame())
    assert "No node facts were recorded in this campaign." in page
    assert "no iterations stored for the slow run" in page


def test_rendering_is_deterministic():
    assert render() == render()


def test_every_svg_is_well_formed(html):
    assert len(svgs(html)) == 10  # 4 + 3 figures, 3 timelines; ET.fromstring parsed each


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
    assert "Verdict: INCONCLUSIVE</span> (no nodes)" in page
    assert "None of 1 runs." in page
    assert len(svgs(page)) == 3


def test_empty_analysis_renders():
    analysis = CampaignAnalysis(
        "c1", Settings(), (), (), (), Verdict(True, ()), ("campaign c1: no runs to analyse",)
    )
    page = render(analysis, nodes=pd.DataFrame(), iterations=pd.DataFrame())
    assert "No successful runs to analyse." in page and "no runs to analyse" in page


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
    specs = {"l2sum-0001": (100, None, True), "stream-0002": (10, "stream", True),
             "dgemm-0003": (10, None, True), "fwq-0004": (5000, "fwq", False)}  # fmt: skip
    for name, (_, _, hib) in specs.items():
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
        n_it, kind, _ = specs[run.variant]
        if kind == "stream":
            for k in ("copy", "scale", "add", "triad"):
                rows += team_iterations(run.run_id, [run.value] * n_it, warmup=1.0, kernel=k)
        elif kind == "fwq":  # 8 threads x 5000 samples, a 50 us spike every 97 samples
            rows += thread_iterations(run.run_id, [[run.value + (i % 97 == 0) * 50 for i in range(n_it)]] * 8)
        else:
            rows += team_iterations(run.run_id, [run.value] * n_it, warmup=1.0)
    page = render(analysis, iterations=iterations_frame(rows))
    assert len(page.encode()) < 3_000_000
    timelines = [s for s in svgs(page) if s.get("data-figure") == "timeline"]
    assert len(timelines) == 24
    for svg in timelines:
        for path in svg.iter("{http://www.w3.org/2000/svg}path"):
            assert path.get("d").count("L") < 400  # decimated: 5000 fwq samples become <= 400 points
