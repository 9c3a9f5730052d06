"""check --deep: which probes are degraded, the follow-up probes run for real into the same campaign, and
the chain of evidence they produce (this VM: no PMU, no DIMM table; both said)."""

from __future__ import annotations

import json
import os

import pytest

from tailscope.analysis.model import Settings
from tailscope.deep import degraded, follow_up_variants, run_deep
from tailscope.importers.iterations_csv import import_iterations
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.campaign import new_task_id
from tailscope.store.load import load_into
from tailscope.workflow import RunRequest, analyze_campaign, run_campaign


def test_degraded_names_the_probe_with_slow_runs(tmp_path):
    csv = tmp_path / "dgemm.csv"
    lines = ["node,run,iteration,value,unit"]
    for run in range(40):
        value = 100.0 * (0.85 if run in (7, 21, 33) else 1 + 0.001 * (run % 5))
        lines.append(f"n1,{run},0,{value},GFLOPS")
    csv.write_text("\n".join(lines) + "\n")
    with load_into(tmp_path / "c", "test", create=True) as load:
        import_iterations(csv, load, task=new_task_id())
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


def test_run_deep_writes_the_chain(tmp_path):
    campaign = tmp_path / "c"
    run_campaign(
        RunRequest(
            variants=((ProbeVariant("l2sum", {"sums": 20}), 2),), campaign_dir=campaign, show_progress=False
        )
    )
    analysis = analyze_campaign(campaign, Settings())
    forced = ["l2sum", "dgemm", "fwq"]
    result = run_deep(campaign, analysis, force=forced, show_progress=False)
    steps = {s.probe: s for s in result.steps}
    assert set(steps) == set(forced)
    (latency,) = steps["l2sum"].follow_ups
    assert latency["probe"] == "latency" and "L1 " in latency["finding"] and "DRAM " in latency["finding"]
    (arith,) = steps["dgemm"].follow_ups
    assert "effective clock" in arith["finding"] and "FP64" in arith["finding"]
    if len(os.sched_getaffinity(0)) >= 2:
        (c2c,) = steps["fwq"].follow_ups
        assert "c2c " in c2c["finding"] and " ns median over " in c2c["finding"]
        assert "c2c not measured: " in c2c["finding"]  # 2 vCPUs: no SMT pair, no second die or socket
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
    assert rc in (0, 1)
    assert "deep: " in out and (tmp_path / "c" / "deep.json").exists()
