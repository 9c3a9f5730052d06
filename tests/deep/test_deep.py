"""check --deep: which probes are degraded, the follow-up probes run for real into the same campaign, and
the chain of evidence they produce (this VM: no PMU, no DIMM table; both said)."""

from __future__ import annotations

import json
import os
import re

import pytest

from tailscope.analysis.model import Settings
from tailscope.importers.iterations_csv import import_iterations
from tailscope.verbs.deep import degraded, follow_up_variants, run_deep
from tailscope.verbs.workflow import analyze_campaign


def test_degraded_names_the_probe_with_slow_runs(tmp_path):
    csv = tmp_path / "dgemm.csv"
    lines = ["node,run,iteration,value,unit"]
    for run in range(40):
        value = 100.0 * (0.85 if run in (7, 21, 33) else 1 + 0.001 * (run % 5))
        lines.append(f"n1,{run},0,{value},GFLOPS")
    csv.write_text("\n".join(lines) + "\n")
    import_iterations(csv, tmp_path / "c")
    analysis = analyze_campaign(tmp_path / "c", Settings())
    found = degraded(analysis)
    assert list(found) == ["imported:dgemm"]
    assert found["imported:dgemm"].startswith("3 of 40 runs slower")


def test_follow_ups_per_component():
    plan = follow_up_variants(["dgemm", "l2sum"])
    assert [(p, v.probe) for p, v, _, _ in plan] == [("dgemm", "arith"), ("l2sum", "latency")]
    if len(os.sched_getaffinity(0)) >= 2:
        stream = follow_up_variants(["stream"])
        assert stream[0][1].probe == "latency"
        cpus = [v.params.get("cpus") for _, v, _, _ in stream[1:]]
        assert len(cpus) == len(os.sched_getaffinity(0)) and all(cpus)  # stream on 1..all cores


def test_run_deep_writes_the_chain(l2sum_analyzed):
    campaign, analysis = l2sum_analyzed
    forced = ["l2sum", "dgemm", "fwq"]
    result = run_deep(campaign, analysis, force=forced, show_progress=False)
    steps = {s.probe: s for s in result.steps}
    assert set(steps) == set(forced)
    (latency,) = steps["l2sum"].follow_ups
    assert latency["probe"] == "latency" and "L1 " in latency["finding"] and "DRAM " in latency["finding"]
    (arith,) = steps["dgemm"].follow_ups
    assert "effective clock" in arith["finding"] and "FP64" in arith["finding"]
    # the seed's table shape travels with it (deep.json; the report's section renders it)
    assert [row[0] for row in arith["arith_table"][0]["rows"]] == ["ADD", "SUB", "MUL", "DIV", "FMA", "SQRT"]
    if len(os.sched_getaffinity(0)) >= 2:
        (c2c,) = steps["fwq"].follow_ups
        assert "c2c " in c2c["finding"] and " ns median over " in c2c["finding"]
        finding = c2c["finding"]
        for level in ("core", "l3", "die", "package", "machine"):  # each measured, or why not (on this host)
            assert re.search(rf"c2c {level}\s", finding) or f"not measured: {level} (" in finding
    assert "step 3 skipped" in result.counters or "hardware counter values" in result.counters
    saved = json.loads((campaign / "deep.json").read_text())
    assert [s["probe"] for s in saved["steps"]] == [s.probe for s in result.steps]
    lines = result.lines()
    assert lines[0].startswith("deep: ") and any(line.startswith("  -> arith") for line in lines)
    # the follow-up trials are in the campaign, next to the suite's
    from tailscope.store.views import connect

    con = connect(campaign)
    probes = {r[0]: r[1] for r in con.execute("SELECT probe, count(*) FROM runs GROUP BY probe").fetchall()}
    con.close()
    assert probes == {"l2sum": 2, "latency": 3, "arith": 3, "c2c": 3}


@pytest.mark.slow
def test_check_deep_end_to_end(tmp_path, capsys):
    from tailscope.cli import main

    rc = main(["check", "--deep", "--trials", "3", "--campaign", str(tmp_path / "c"), "--no-progress"])
    out = capsys.readouterr().out
    assert rc in (0, 1, 3)  # healthy, degraded, or inconclusive on a busy machine: the deep chain runs anyway
    assert "deep: " in out and (tmp_path / "c" / "deep.json").exists()


def _arith_summary(before: float, after: float, fma: float) -> dict:
    stats = {"median": fma, "min": fma, "max": fma, "mean": fma, "n": 3}
    half = {"median": 0.5, "min": 0.5, "max": 0.5, "mean": 0.5, "n": 3}
    return {
        "clock": [
            {"effective_hz": (before + after) / 2, "effective_hz_before": before, "effective_hz_after": after}
        ],
        "table": [
            {
                "precision": "fp64",
                "width": "scalar",
                "op": "fma",
                "latency_cycles": stats,
                "rthroughput_cycles": half,
            }
        ],
    }


def test_expectations_judge_each_follow_up():
    """A healthy component reads 'as expected'; a clock drop, a slow FMA, a cache level faster than the one
    before it, and less bandwidth on more cores read 'differs' and say what differed."""
    from tailscope.analysis.deep_judge import NodeReference
    from tailscope.analysis.reference_tables import cpu_identity, part_of
    from tailscope.verbs.deep import AS_EXPECTED, DIFFERS, _evidence, _judge_scaling

    zen4 = part_of(cpu_identity("vendor_id : AuthenticAMD\ncpu family : 25\nmodel : 17\n"))
    ref = NodeReference(zen4, "AMD Zen 4", None, "", 4.2e9, 10)
    healthy = _evidence("arith", [_arith_summary(4.2e9, 4.2e9, 4.0)], [], ref)
    assert healthy[2] == AS_EXPECTED and "at least 3.99 GHz" in healthy[1]
    dropped = _evidence("arith", [_arith_summary(2.4e9, 2.0e9, 4.0)], [], ref)
    assert dropped[2] == DIFFERS and "the clock is capped: 2.20 GHz, 48% below the node's usual 4.20 GHz" in (
        dropped[0]
    )
    assert "the clock moved between 2.00 GHz and 2.40 GHz" in dropped[0]
    slow_fma = _evidence("arith", [_arith_summary(4.2e9, 4.2e9, 5.0)], [], ref)
    assert slow_fma[2] == DIFFERS and "fp64 scalar fma latency 5.00 cycles, published 4 cycles" in slow_fma[0]
    no_part = NodeReference(None, "unknown", None, "", None, 0)

    def level(name: str, ns: float) -> dict:
        return {"name": name, "ns": {"median": ns}, "cycles": {"median": ns * 4}}

    ok = _evidence(
        "latency", [{"working_sets": [level("L1", 1), level("L2", 3), level("DRAM", 90)]}], [], no_part
    )
    assert ok[2] == AS_EXPECTED and "(L1 < L2 < DRAM)" in ok[1]
    odd = _evidence(
        "latency", [{"working_sets": [level("L1", 1), level("L3", 400), level("DRAM", 90)]}], [], no_part
    )
    assert odd[2] == DIFFERS and "DRAM (90.0 ns) faster than L3 (400.0 ns)" in odd[0]
    ups = [{"probe": f"stream on {c}", "median": m} for c, m in (("0", 20.0), ("0-1", 30.0), ("0-2", 25.0))]
    _judge_scaling(ups)
    assert (
        "status" not in ups[0]
        and "reference" in ups[0]["expected"]
        and ups[1]["status"] == AS_EXPECTED
        and ups[2]["status"] == DIFFERS
    )
    assert "30.000 on 0-1" in ups[2]["expected"]


def test_load_deep_reads_what_run_deep_wrote(tmp_path):
    from tailscope.errors import InputError
    from tailscope.verbs.deep import DeepResult, Step, load_deep

    assert load_deep(tmp_path) is None
    result = DeepResult(
        [Step("stream", "slow", [{"probe": "latency", "isolates": "x", "finding": "y"}])], "none"
    )
    from dataclasses import asdict

    (tmp_path / "deep.json").write_text(json.dumps(asdict(result)))
    assert load_deep(tmp_path) == result
    (tmp_path / "deep.json").write_text("{not json")
    with pytest.raises(InputError, match=r"deep\.json: not the deep\.json"):
        load_deep(tmp_path)
