"""The report's cluster section: node ensembles of every probe variant measured on 3 or more nodes.

Per variant: the per-node min/median/max chart (seed 000 Fig. 9) coloured by verdict, the variance
components (how much of the variation is the node's), the ranked nodes with their shrunken effects and
verdicts, the speed bins, slow-run rates and what they cost a synchronous job. Numbers come from
analysis/cluster.py; nothing is computed here except formatting.
"""

from __future__ import annotations

from tailscope.analysis.causes.hardware_config import fact_text
from tailscope.analysis.cluster import ClusterSummary, NodeEffect
from tailscope.analysis.model import CampaignAnalysis
from tailscope.analysis.wording import pct
from tailscope.report.markup import esc
from tailscope.report.markup import explain as _explain
from tailscope.report.markup import table as _table
from tailscope.report.markup import td as _td

MAX_NODE_ROWS = 40  # ranked nodes listed per variant (flagged nodes always are)


def render_cluster_section(analysis: CampaignAnalysis) -> str:
    """The HTML of the section, or "" when no variant has 3 or more nodes and no node is configured unlike
    its peers."""
    config = _config_table(analysis)
    if not analysis.cluster and not config:
        return ""
    parts = ['<h2 id="cluster">Nodes against their peers</h2>', _explain(_INTRO)]
    if config:
        parts.append(config)
    for summary in analysis.cluster:
        parts.append(_variant(summary))
    return "\n".join(parts)


def _config_table(analysis: CampaignAnalysis) -> str:
    """Nodes configured unlike the majority: the node verdicts' hardware-config causes (node/fleet.py)."""
    rows = []
    for n in analysis.nodes:
        for c in n.causes:
            if c.cause != "hardware-config":
                continue
            slower = "slower than its peers (drained)" if n.drain else "not slower"
            for field, v in c.evidence.get("differs", {}).items():
                peers = "(ranks mixed on this node)" if v["peers"] is None else fact_text(field, v["peers"])
                rows.append(
                    [_td(n.node), _td(field), _td(fact_text(field, v["node"])), _td(peers), _td(slower)]
                )
    if not rows:
        return ""
    return (
        '<h3 id="hwconfig">Configured unlike the majority (hardware-config)</h3>'
        + _explain(
            "Node facts compared across the campaign's nodes (DIMM ranks, sizes, configured speed and "
            "population; CPU, microcode, BIOS, cpufreq, governor, turbo, THP, kernel): a node is listed "
            "where its value is not the one most nodes have. A slower node that is listed has a likely "
            "cause; one that is not slower is worth fixing before it costs anything."
        )
        + _table(["node", "field", "this node", "most nodes", "performance"], rows)
    )


_INTRO = (
    "Each node is compared with the median node of the fleet on the same probe variant. A node is marked "
    "'drain' when it is slower than the fleet's normal node-to-node spread with the false-alarm rate "
    "controlled across all nodes (Bonferroni), and 're-test' when the looser Benjamini-Hochberg selection "
    "picks it: confirm those with a second batch before acting. Effects are shrunk towards the fleet "
    "(empirical Bayes), so a node with few runs is not condemned by one bad run."
)


def _variant(s: ClusterSummary) -> str:
    c = s.components
    flagged = [n for n in s.nodes if n.verdict != "ok"]
    head = (
        f"<h3>{esc(s.variant)} ({esc(s.probe)}, {len(s.nodes)} nodes, {s.runs} runs)</h3>"
        f"<p>Drain: <b>{esc(' '.join(s.drain) or 'none')}</b>; "
        f"re-test: <b>{esc(' '.join(s.retest) or 'none')}</b>"
        f" (alpha {s.settings.alpha_drain:g} family-wise over {len(s.nodes)} nodes; FDR "
        f"{s.settings.alpha_retest:g}; at least {pct(s.settings.min_node_effect)} slower).</p>"
    )
    icc_ci = (
        f" [{c.icc_low:.2f}, {c.icc_high:.2f}]" if c.icc_low is not None and c.icc_high is not None else ""
    )
    components = _table(
        ["", "value", "what it means"],
        [
            [
                _td("node-to-node s.d."),
                _td(pct(c.node_sd_pct), num=True),
                _td("typical difference between nodes"),
            ],
            [
                _td("run-to-run s.d."),
                _td(pct(c.run_sd_pct), num=True),
                _td("typical difference between runs"),
            ],
            [
                _td("ICC"),
                _td(f"{c.icc:.2f}{icc_ci}", num=True),
                _td("share of the variance that belongs to the node (interval: F-based, 95%)"),
            ],
            [
                _td("F test"),
                _td("-" if c.p_value is None else f"F={c.f_statistic:.3g}, p={c.p_value:.2g}", num=True),
                _td("do nodes differ at all?"),
            ],
            [
                _td("slow runs"),
                _td(
                    f"{s.slow_runs}/{s.runs} = {pct(s.slow_rate)} "
                    f"[{pct(s.slow_rate_low)}, {pct(s.slow_rate_high)}]",
                    num=True,
                ),
                _td(f"runs more than {pct(s.threshold)} below their node's median (Clopper-Pearson)"),
            ],
        ],
    )
    shown = list(s.nodes[:MAX_NODE_ROWS]) + [n for n in s.nodes[MAX_NODE_ROWS:] if n.verdict != "ok"]
    rows = [_node_row(s, n) for n in shown]
    more = len(s.nodes) - len(shown)
    nodes = _table(
        ["rank", "node", "runs", "median", "min", "max", "vs median node", "shrunk slowdown", "z", "p", "bin",
         "slow runs", "verdict"],
        rows,
    ) + (f'<p class="explain">{more} faster nodes not listed.</p>' if more > 0 else "")  # fmt: skip
    bins = _table(
        ["bin", "nodes", "median", "range", "spread"],
        [
            [
                _td(b.index, num=True),
                _td(len(b.nodes), num=True, title=" ".join(b.nodes[:200])),
                _td(f"{b.median:.4g} {s.unit}", num=True),
                _td(f"{b.low:.4g} - {b.high:.4g}", num=True),
                _td(pct(b.spread), num=True),
            ]
            for b in s.bins
        ],
    )
    jobs = _table(
        ["nodes in the job", "P(some node slow in a step)", "expected slowdown per step"],
        [
            [
                _td(j.nodes, num=True),
                _td(pct(j.p_any_slow), num=True),
                _td(pct(j.expected_slowdown), num=True),
            ]
            for j in s.jobs
        ],
    )
    fleet = (
        f"All {len(s.nodes)} nodes in one synchronous job, node differences included: each step runs at the "
        f"slowest node, {pct(s.fleet_job_slowdown)} below the median node"
        + (
            f"; without the drain nodes {pct(s.fleet_job_slowdown_drained)}."
            if s.fleet_job_slowdown_drained is not None
            else "."
        )
    )
    return "\n".join(
        [
            head,
            _explain(
                "The per-node min / median / max (the seed's Fig. 9) is the figure in this variant's own "
                "section, its nodes coloured by this screen's verdict (drain, re-test, ok)."
            ),
            components,
            _explain(
                "The random-effects model splits the variation of log performance into a node part and a run "
                "part. A large ICC means where a job runs matters more than when."
            ),
            nodes,
            _explain(
                f"{len(flagged)} of {len(s.nodes)} nodes flagged. 'vs median node' is the node median over "
                "the median node's; the shrunk slowdown is what the ranking and the verdict use; z and p are "
                "the one-sided node test (robust z of node medians, see Methods)."
            ),
            "<h4>Speed bins</h4>",
            bins,
            _explain(
                ("Chosen: the fewest bins" if s.bins_chosen else "Given: bins")
                + " of nodes with similar medians (each spanning at most "
                + f"{pct(s.settings.bin_tolerance)} when "
                "chosen), for unequal work shares such as heterogeneous HPL (seed: four speed bins)."
            ),
            "<h4>What run-to-run slowness costs a synchronous job</h4>",
            jobs,
            _explain(
                "A synchronous step waits for its slowest node: with a per-run slow rate p, some node is "
                "slow with probability 1-(1-p)^N; the expected slowdown is that of the slowest of N runs "
                "drawn from the node-scaled runs. " + fleet
            ),
        ]
    )


def _node_row(s: ClusterSummary, n: NodeEffect) -> list[str]:
    css = "bad" if n.verdict == "drain" else ""
    return [
        _td(n.rank, num=True),
        _td(n.node, css=css),
        _td(n.n, num=True),
        _td(f"{n.median:.4g}", num=True),
        _td(f"{n.minimum:.4g}", num=True),
        _td(f"{n.maximum:.4g}", num=True),
        _td(f"{n.ratio:.4f}", num=True),
        _td(pct(n.slowdown), num=True),
        _td(f"{n.z:.2f}", num=True),
        _td(f"{n.p_value:.2g}", num=True),
        _td(n.speed_bin, num=True),
        _td(f"{n.slow_runs} ({pct(n.slow_rate_low)}-{pct(n.slow_rate_high)})", num=True),
        _td(n.verdict, css=css),
    ]
