"""The top-down section's HTML from a chain (the browser test renders a real one; here every branch)."""

from __future__ import annotations

from tailscope.report.deep_section import deep_section
from tailscope.report.models import DeepResult, Step

NO_PMU = "no hardware counters (no PMU here, or the suite ran without --events): step 3 skipped"


def _chain() -> DeepResult:
    stream = Step(
        "stream",
        "node n1 slower than its peers (0.880 of the fleet median)",
        [
            {
                "probe": "latency",
                "isolates": "load latency per level, DRAM last",
                "finding": "L1 1.0 ns, L2 3.3 ns, L3 13.0 ns, DRAM 90.0 ns",
                "expected": "each level slower than the one before it (L1 < L2 < L3 < DRAM)",
                "status": "as expected",
            },
            {
                "probe": "stream on 0-1",
                "isolates": "bandwidth on 1..all cores",
                "finding": "median 17.4 over 3 trials",
                "expected": "at least 0.95 x the bandwidth on the fewer cores before it (21.7 on 0)",
                "status": "differs",
            },
        ],
    )
    dgemm = Step("dgemm", "2 of 20 runs slower", [{"probe": "arith", "isolates": "FP", "finding": "a <b>"}])
    dimms = {"dimms_unreadable": "dmidecode -t 17: no SMBIOS table", "summary": None}
    return DeepResult([stream, dgemm], NO_PMU, dimms)


def test_each_chain_with_its_evidence_and_verdicts():
    html = deep_section(_chain())
    assert html.startswith('<section id="deep">') and html.endswith("</section>")
    assert '<h3 id="deep-stream">1. stream</h3>' in html and '<h3 id="deep-dgemm">2. dgemm</h3>' in html
    assert "<b>Degraded:</b> node n1 slower than its peers (0.880 of the fleet median)" in html
    assert '<span class="bad">stream on 0-1 differs from what a healthy component shows</span>' in html
    assert '<td class="good">as expected</td>' in html and '<td class="bad">differs</td>' in html
    assert "no follow-up was judged against an expectation" in html  # dgemm's arith has no rule here
    assert "<td>(no rule)</td><td>not judged</td>" in html
    assert "a &lt;b&gt;" in html and "a <b>" not in html  # findings are text
    assert html.count(f"<b>Counters:</b> {NO_PMU}") == 2  # no PMU: said for every chain
    assert html.count("<b>DIMMs:</b>") == 1 and "not readable here: dmidecode -t 17" in html  # stream only


def test_counters_of_the_degraded_probe_where_they_were_recorded():
    attribution = {
        "variants": [
            {
                "variant": "stream-1",
                "slow_runs": 2,
                "counters": [
                    {
                        "counter": "cpu/cache-misses",
                        "slow_median": 2.5e6,
                        "normal_median": 1.1e6,
                        "q_value": 0.003,
                    },
                    {"counter": "cpu/cycles", "slow_median": 9e9, "normal_median": 8e9, "q_value": 0.2},
                ],
            },
            {"variant": "dgemm-1", "slow_runs": 0, "counters": []},
        ]
    }
    html = deep_section(_chain(), attribution, {"stream-1": "stream", "dgemm-1": "dgemm"})
    stream, dgemm = html.split('<h3 id="deep-dgemm">')
    assert "cpu/cache-misses: slow runs 2.5e+06, normal 1.1e+06 (q = 0.003)" in stream
    assert '<a href="#counters">Counters</a>' in stream and NO_PMU not in stream
    assert f"<b>Counters:</b> {NO_PMU}" in dgemm  # no slow run of dgemm with counters: the statement


def test_no_section_without_deep_and_a_line_when_nothing_was_degraded():
    assert deep_section(None) == ""
    html = deep_section(DeepResult([], NO_PMU))
    assert "No probe of the suite was degraded" in html and NO_PMU in html
