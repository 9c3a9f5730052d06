"""latency: working sets from sysfs, per-iteration values recomputed from the TSC, and a memory hierarchy
that looks like one (L1 < L2 < DRAM), on a busy 2-core VM (medians only)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from probe_runs import online_cpus

from tailscope.node.facts import virtualization

SMALL = ("--max-bytes", "64m", "--iterations", "7", "--clock-chunks", "20")


def cache_bytes(cpu: int, level: int) -> int:
    for index in sorted(Path(f"/sys/devices/system/cpu/cpu{cpu}/cache").glob("index*")):
        if (
            int((index / "level").read_text()) == level
            and (index / "type").read_text().strip() != "Instruction"
        ):
            return int((index / "size").read_text().strip().removesuffix("K")) * 1024
    pytest.skip(f"sysfs has no level-{level} cache for CPU {cpu}")


def by_name(run) -> dict[str, dict]:
    return {w["name"]: w for w in run.result["summary"]["working_sets"]}


def test_levels_rise_and_numbers_recompute(probe):
    run = probe("latency", *SMALL)
    params, hz = run.params, run.config["tsc_hz"]
    cpu = run.config["cpus"][0]
    assert run.config["cpus"] == online_cpus()[:1]  # default: the first core only
    l1, l2 = cache_bytes(cpu, 1), cache_bytes(cpu, 2)
    assert params["l1d_bytes"] == l1 and params["l2_bytes"] == l2
    sets = {w["name"]: w["bytes"] for w in params["working_sets"]}
    assert sets["L1"] == l1 // 2 // 64 * 64
    assert sets["L2"] == int(math.sqrt(l1 * l2)) // 64 * 64
    assert sets["DRAM"] == 64 << 20  # capped by --max-bytes
    loads = params["loads"]
    clock = run.result["summary"]["clock"][0]
    ghz = clock["effective_hz"] / 1e9
    assert 0.3 < ghz < 7.0, clock
    for rec in run.of("iteration"):
        seconds = (rec["tsc_end"] - rec["tsc_start"]) / hz
        n = loads if not rec["warmup"] else None
        if n:
            assert rec["value"] == pytest.approx(seconds * 1e9 / n, rel=1e-9)
        assert rec["cpu"] == cpu and rec["kernel"] in sets
    levels = by_name(run)
    ns = {name: levels[name]["ns"]["median"] for name in levels}
    assert ns["L1"] < ns["L2"] < ns["DRAM"], ns
    if "L3" in ns:
        assert ns["L2"] < ns["L3"], ns
        # the L3 set below DRAM's holds on a node; in a guest the host's L3 is shared with other guests, and a
        # clean-clone run here read L3 232 ns against DRAM 194 ns (the code says which case this is)
        if virtualization() == "none":
            assert ns["L3"] < ns["DRAM"], ns
    # L1 load-to-use latency: 3 to 6 cycles on every x86-64 and Arm server core of the last decade. Whatever
    # shares the core (an SMT sibling, another guest's vCPU) only adds cycles, so the fastest iteration is the
    # core's; the median is held to it where the code reads no hypervisor (a clean-clone run in a guest beside
    # other work read L1 min 4.6, median 8.9 cycles in 7 iterations)
    assert 2.5 < levels["L1"]["cycles"]["min"] < 8, levels["L1"]
    if virtualization() == "none":
        assert levels["L1"]["cycles"]["median"] < 8, levels["L1"]
    for w in levels.values():
        assert w["cycles"]["median"] == pytest.approx(w["ns"]["median"] * ghz, rel=1e-9)
    dram = [r["value"] for r in run.of("iteration") if r["kernel"] == "DRAM" and not r["warmup"]]
    assert run.result["value"] == pytest.approx(sorted(dram)[len(dram) // 2], rel=1e-12)
    assert run.result["metric"] == "latency" and run.result["higher_is_better"] is False
    assert run.of("validation")[0]["message"].startswith("Solution Validates: every chase of ")


def test_sweep_and_explicit_sizes(probe):
    run = probe("latency", "--sizes", "8k,128k,8m", "--iterations", "3", "--clock-chunks", "5", "--no-pages")
    names = [w["name"] for w in run.params["working_sets"]]
    assert names == ["ws_8192", "ws_131072", "ws_8388608"]
    sweep = probe("latency", "--sweep", "1", "--max-bytes", "16m", "--iterations", "2", "--clock-chunks", "5")
    sizes = [w["bytes"] for w in sweep.params["working_sets"]]
    assert sizes == sorted(sizes) and sizes[0] == 4096 and sizes[-1] == 16 << 20
    assert {"L1", "L2", "DRAM"} <= {w["name"] for w in sweep.params["working_sets"]}


def test_every_cpu_in_turn(probe):
    cpus = online_cpus()[:2]
    run = probe(
        "latency",
        "--sizes",
        "16k",
        "--iterations",
        "3",
        "--clock-chunks",
        "5",
        "--cpus",
        ",".join(map(str, cpus)),
    )
    assert [c["cpu"] for c in run.result["summary"]["clock"]] == cpus
    for rec in run.of("iteration"):
        assert rec["cpu"] == cpus[rec["thread"]]


def test_corrupted_chase_fails_validation(probe):
    run = probe(
        "latency",
        "--sizes",
        "16k",
        "--iterations",
        "2",
        "--clock-chunks",
        "5",
        env={"TAILSCOPE_TEST_CORRUPT": "1"},
        expect=4,
    )
    assert not run.of("iteration") and not run.of("result")
    assert run.of("validation")[0]["passed"] is False
    assert "ended on the wrong line" in run.stderr


def test_bad_options(probe):
    assert "--loads 100: must be a multiple of 16" in probe("latency", "--loads", "100", expect=2).stderr
    assert "--sizes 1k,zz: zz is not a byte count" in probe("latency", "--sizes", "1k,zz", expect=2).stderr
