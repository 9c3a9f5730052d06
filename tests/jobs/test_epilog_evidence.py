"""`tailscope jobs prolog` / `jobs epilog --print` on a node's files (--root): what the record says.

The node's files are real ones recorded on the development VM plus sysfs files in the kernel's formats
(fixtures/README.md); between the prolog and the epilog the test changes them as a kernel would (a package
throttled 3 times, one machine check, a THP fallback, a co-runner's CPU time) and checks the record's
increases against those changes; without a prolog reading the record holds the values since boot, named
`.total`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from jobs_node_tree import add_process, build, bump, bump_row, bump_vmstat, tailscope

from tailscope.evidence import buddyinfo, interrupts, nodespan, sysfs
from tailscope.node.dimms import edac_error_counts

FIX = Path(__file__).parent / "fixtures"
# What the record says is judged here, not the bound (test_epilog_bound.py): a loaded machine may take more
# than the default 1.8 s, and the record would then lack the sources read last
UNHURRIED = ("--timeout", "60")


def _ts(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`tailscope jobs VERB ...` with a bound no loaded machine reaches."""
    return tailscope(*args[:2], *UNHURRIED, *args[2:], env=env)


def _env(job: str = "4242", node: str = "n7", **more: str) -> dict[str, str]:
    """Slurm's prolog/epilog environment (facts-slurm-accounting.md): no PATH, no HOME."""
    env = {"SLURM_JOB_ID": job, "SLURMD_NODENAME": node, "SLURM_CLUSTER_NAME": "tailscope-test"}
    env["SLURM_SCRIPT_CONTEXT"] = "epilog_slurmd"
    env.update(more)
    return env


def _record(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _boot_s() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def test_record_is_the_increase_over_the_job(tmp_path: Path) -> None:
    root, state = build(tmp_path / "node"), tmp_path / "state"
    add_process(root, 300, "slurmd", cpu_s=4.0, started_s=1.0)
    add_process(root, 301, "kworker/0:1", cpu_s=1.0, started_s=1.0)
    add_process(root, 302, "quiet", cpu_s=9.0, started_s=1.0)
    pro = _ts("jobs", "prolog", "--root", str(root), "--state-dir", str(state), env=_env())
    assert pro.returncode == 0 and pro.stderr == "", pro.stderr
    assert [p.name for p in state.iterdir()] == ["job-4242-n7.json"]

    cpu = root / "sys/devices/system/cpu"
    for n in (0, 1):  # one package: both CPUs show its count going from 40 to 43
        bump(cpu / f"cpu{n}/thermal_throttle/package_throttle_count", 3)
    bump(cpu / "cpu1/thermal_throttle/core_throttle_count", 2)
    bump_row(root / "proc/interrupts", "MCE", 1)
    bump_row(root / "proc/interrupts", "TRM", 5)
    bump_vmstat(root / "proc/vmstat", "thp_fault_fallback", 17)
    bump(root / "sys/devices/system/edac/mc/mc1/ce_count", 4)
    add_process(root, 300, "slurmd", cpu_s=4.5, started_s=1.0)  # +0.5 s
    add_process(root, 301, "kworker/0:1", cpu_s=1.25, started_s=1.0)  # a kernel thread: +0.25 s
    add_process(root, 303, "stress-ng-cpu", cpu_s=6.0, started_s=_boot_s())  # started during the job
    job_cgroup = "0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0\n"
    add_process(root, 304, "a.out", cpu_s=30.0, started_s=_boot_s(), cgroup=job_cgroup)  # the job's own

    epi = _ts(
        "jobs", "epilog", "/unused", "--print", "--root", str(root), "--state-dir", str(state), env=_env()
    )
    record = _record(epi)
    assert epi.stderr == ""
    ev = record["evidence"]
    assert ev["thermal.package_throttle_count"] == 3  # once per package, not once per CPU
    assert ev["thermal.core_throttle_count"] == 2
    assert ev["thermal.core_throttle_ms"] == 0 and ev["thermal.package_throttle_ms"] == 0
    assert ev["mce.count"] == 1 and ev["thermal.interrupts"] == 5 and ev["mce.threshold_interrupts"] == 0
    assert ev["vmstat.thp_fault_fallback"] == 17 and ev["vmstat.compact_stall"] == 0
    assert ev["edac.ce_count"] == 4 and ev["edac.ue_count"] == 0
    # co-runners: slurmd's 0.5 s and the newcomer's 6 s; not the job's process, not the quiet one
    assert ev["corunners.cpu_s"] == pytest.approx(6.5, abs=0.02)
    assert ev["corunners.kernel_cpu_s"] == pytest.approx(0.25, abs=0.02)
    assert ev["corunners.top"].startswith("stress-ng-cpu[303] 6.00 s, slurmd[300] 0.50 s")
    assert "a.out" not in ev["corunners.top"] and "quiet" not in ev["corunners.top"]
    # gauges at the end, as read
    assert ev["cpufreq.min_khz"] == 2_400_000 and ev["cpufreq.max_khz"] == 2_500_000
    assert ev["cpufreq.limit_khz"] == 3_500_000
    load = (FIX / "proc_loadavg").read_text().split()
    assert ev["load.avg1"] == float(load[0]) and ev["load.runnable"] == int(load[3].split("/")[0])
    assert 0 < ev["buddyinfo.huge_share"] < 1 and ev["buddyinfo.free_mib"] > 0
    assert not any(name.endswith(".total") for name in ev)
    assert record["job_id"] == "4242" and record["node"] == "n7" and record["cluster"] == "tailscope-test"
    assert record["version"] == 1 and record["errors"] == []
    assert record["span_s"] > 0 and record["job_start"] is not None and record["at"].endswith("Z")
    assert isinstance(record["facts_digest"], str) and len(record["facts_digest"]) == 32
    assert 0 < record["epilog_cpu_s"] < record["epilog_wall_s"] + 5 and record["epilog_wall_s"] > 0
    assert list(state.iterdir()) == []  # the job's state file is gone


def test_without_a_prolog_the_counters_are_since_boot(tmp_path: Path) -> None:
    root = build(tmp_path / "node")
    add_process(root, 300, "slurmd", cpu_s=4.0, started_s=1.0)
    start = int(time.time()) - 90
    env = _env(SLURM_JOB_START_TIME=str(start))  # Slurm 23.02+ sets it
    record = _record(
        _ts(
            "jobs",
            "epilog",
            "/unused",
            "--print",
            "--root",
            str(root),
            "--state-dir",
            str(tmp_path / "s"),
            env=env,
        )
    )
    ev = record["evidence"]
    assert ev["thermal.package_throttle_count.total"] == 40 and ev["mce.count.total"] == 1
    assert ev["edac.ce_count.total"] == 4
    assert "thermal.package_throttle_count" not in ev
    assert not any(name.startswith("corunners.") for name in ev)  # no start reading: no span to judge
    assert ev["cpufreq.mean_khz"] == 2_450_000  # gauges need no start
    assert record["span_s"] == pytest.approx(90, abs=30) and record["errors"] == []


def test_a_vm_without_thermal_or_edac_files_leaves_those_names_out(tmp_path: Path) -> None:
    root = build(tmp_path / "node", interrupts="proc_interrupts.kvm", thermal=False)
    for path in (root / "sys/devices/system/edac").rglob("*_count"):
        path.unlink()
    record = _record(_ts("jobs", "epilog", "/unused", "--print", "--root", str(root), env=_env()))
    ev = record["evidence"]
    assert not any(n.startswith(("thermal.package", "thermal.core", "mce.", "edac.")) for n in ev), ev
    assert ev["thermal.interrupts.total"] == 0  # the KVM guest prints TRM, never MCE
    assert record["errors"] == []


def test_an_unusable_prolog_reading_is_named_and_the_counters_fall_back(tmp_path: Path) -> None:
    root, state = build(tmp_path / "node"), tmp_path / "state"
    state.mkdir()
    (state / "job-4242-n7.json").write_text('{"version": 1, "job_id": "4242", "node": "n7", "reading": [')
    epi = _ts(
        "jobs", "epilog", "/unused", "--print", "--root", str(root), "--state-dir", str(state), env=_env()
    )
    record = _record(epi)
    assert "thermal.package_throttle_count.total" in record["evidence"]
    (error,) = record["errors"]
    assert error.startswith(f"prolog reading {state}/job-4242-n7.json: not usable")
    assert epi.stderr.count("\n") == 1 and "job 4242 on n7" in epi.stderr and "Traceback" not in epi.stderr

    # another job's reading under this name (a reused id after a state-dir copy) is not taken either
    pro = _ts("jobs", "prolog", "--root", str(root), "--state-dir", str(state), env=_env(job="999"))
    assert pro.returncode == 0
    (state / "job-999-n7.json").rename(state / "job-4242-n7.json")
    record = _record(
        _ts(
            "jobs", "epilog", "/unused", "--print", "--root", str(root), "--state-dir", str(state), env=_env()
        )
    )
    assert "another job's" in record["errors"][0] and "mce.count.total" in record["evidence"]


def test_a_prolog_reading_from_before_a_reboot_is_not_used(tmp_path: Path) -> None:
    root, state = build(tmp_path / "node"), tmp_path / "state"
    assert _ts("jobs", "prolog", "--root", str(root), "--state-dir", str(state), env=_env()).returncode == 0
    path = state / "job-4242-n7.json"
    data = json.loads(path.read_text())
    data["reading"]["boot_s"] = _boot_s() + 86400  # taken a day into an earlier, longer boot
    path.write_text(json.dumps(data))
    record = _record(
        _ts(
            "jobs", "epilog", "/unused", "--print", "--root", str(root), "--state-dir", str(state), env=_env()
        )
    )
    assert record["errors"] == [
        "the prolog reading is from before the node's last boot: the counters are since boot"
    ]
    assert "mce.count.total" in record["evidence"] and record["span_s"] is None


def test_old_state_files_of_jobs_without_an_epilog_are_removed(tmp_path: Path) -> None:
    root, state = build(tmp_path / "node"), tmp_path / "state"
    for job in ("1", "2", "4242"):
        assert (
            _ts(
                "jobs", "prolog", "--root", str(root), "--state-dir", str(state), env=_env(job=job)
            ).returncode
            == 0
        )
    old = time.time() - 61 * 86400
    os.utime(state / "job-1-n7.json", (old, old))  # its node's epilog never ran (slurmd killed)
    (state / "unrelated").write_text("kept")
    os.utime(state / "unrelated", (old, old))
    _ts("jobs", "epilog", "/unused", "--print", "--root", str(root), "--state-dir", str(state), env=_env())
    assert sorted(p.name for p in state.iterdir()) == ["job-2-n7.json", "unrelated"]


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({}, "no job: SLURM_JOB_ID is not set"),
        ({"SLURM_JOB_ID": "12;reboot"}, "job id '12;reboot': expected a whole number"),
        (
            {"SLURM_JOB_ID": "12", "SLURMD_NODENAME": "../etc"},
            "node name '../etc': expected a Slurm node name",
        ),
    ],
)
@pytest.mark.parametrize("verb", ["prolog", "epilog"])
def test_bad_slurm_environment_is_one_line_and_exit_0(
    tmp_path: Path, env: dict, line: str, verb: str
) -> None:
    args = ["jobs", verb] + (["/unused"] if verb == "epilog" else []) + ["--state-dir", str(tmp_path / "s")]
    proc = _ts(*args, env=env)
    assert proc.returncode == 0
    assert proc.stderr.startswith(f"tailscope jobs {verb}: {line}") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "s").exists()


def test_the_store_failing_is_one_line_and_exit_0(tmp_path: Path) -> None:
    root, history = build(tmp_path / "node"), tmp_path / "history"
    history.write_text("a file where the history should be")
    proc = _ts(
        "jobs", "epilog", str(history), "--root", str(root), "--state-dir", str(tmp_path / "s"), env=_env()
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.startswith(f"tailscope jobs epilog: job 4242 on n7: not stored in {history}: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# --- the readers the epilog adds to evidence/ and node/ -------------------------------------------------
def test_interrupt_rows_summed_over_cpus() -> None:
    text = (FIX / "proc_interrupts.intel").read_text()
    assert interrupts.row_totals(text, {"MCE", "MCP", "TRM", "ERR", "XYZ"}) == {
        "MCE": 1, "MCP": 576, "TRM": 23, "ERR": 0,
    }  # fmt: skip
    kvm = (FIX / "proc_interrupts.kvm").read_text()
    assert "MCE" not in interrupts.row_totals(kvm, {"MCE", "TRM"})


def test_buddyinfo_fragmentation_on_the_recorded_file() -> None:
    zones = buddyinfo.parse((FIX / "proc_buddyinfo").read_text())
    assert [z.zone for z in zones] == ["DMA", "DMA32", "Normal"] and len(zones[0].free_blocks) == 11
    got = buddyinfo.summarize(zones, order=9, page_bytes=4096)
    pages = sum(c << o for z in zones for o, c in enumerate(z.free_blocks))
    huge = sum(c << o for z in zones for o, c in enumerate(z.free_blocks) if o >= 9)
    assert got.free_bytes == pages * 4096 and got.huge_share == pytest.approx(huge / pages)
    assert got.huge_share_min_node == got.huge_share  # one NUMA node


def test_buddyinfo_lowest_numa_node_share() -> None:
    text = (
        "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      4      0\n"
        "Node 1, zone   Normal   2048      0      0      0      0      0      0      0      0      1      0\n"
    )
    got = buddyinfo.summarize(buddyinfo.parse(text), order=9, page_bytes=4096)
    assert got.huge_share_min_node == pytest.approx(512 / (2048 + 512))
    assert got.huge_share == pytest.approx((4 * 512 + 512) / (4 * 512 + 512 + 2048))
    assert buddyinfo.huge_order(4096, Path("/nonexistent")) == 9  # 2 MiB of 4 KiB pages
    assert buddyinfo.parse("garbage\nNode x, zone Normal 1 2\n") == []


def test_throttle_counts_once_per_package(tmp_path: Path) -> None:
    cpu = tmp_path / "cpu"
    for n, package in ((0, 0), (1, 0), (2, 1), (3, 1)):
        (cpu / f"cpu{n}/thermal_throttle").mkdir(parents=True)
        (cpu / f"cpu{n}/topology").mkdir()
        (cpu / f"cpu{n}/topology/physical_package_id").write_text(f"{package}\n")
        (cpu / f"cpu{n}/thermal_throttle/core_throttle_count").write_text(f"{n}\n")
        (cpu / f"cpu{n}/thermal_throttle/package_throttle_count").write_text(f"{10 * (package + 1)}\n")
    got = sysfs.throttle_totals([0, 1, 2, 3], cpu)
    assert got == {"core_throttle_count": 6, "package_throttle_count": 30}
    assert sysfs.throttle_totals([0], tmp_path / "none") == {}


def test_edac_error_counts_over_controllers(tmp_path: Path) -> None:
    for n, (ce, ue) in enumerate(((3, 0), (5, 1))):
        (tmp_path / f"mc{n}").mkdir()
        (tmp_path / f"mc{n}/ce_count").write_text(f"{ce}\n")
        (tmp_path / f"mc{n}/ue_count").write_text(f"{ue}\n")
    (tmp_path / "power").mkdir()
    assert edac_error_counts(tmp_path) == {"ce_count": 8, "ue_count": 1}
    assert edac_error_counts(tmp_path / "absent") == {}


def test_reading_round_trips_through_the_state_file() -> None:
    reading, errors = nodespan.read()
    assert errors == []
    again = nodespan.Reading.from_json(json.loads(json.dumps(reading.to_json())))
    assert again == reading and again.processes  # this host's processes were read
    with pytest.raises((ValueError, TypeError, KeyError)):
        nodespan.Reading.from_json({"counters": {"x": "1"}, "gauges": {}, "processes": {}, "boot_s": 1})


def test_facts_digest_is_the_one_the_history_keys_this_node_by(tmp_path: Path) -> None:
    """The epilog, in Slurm's bare environment, and `history add` of a campaign run on this node (its facts
    as the campaign stored them) name the same facts: the jobs' evidence joins the node's history by it."""
    campaign = tmp_path / "campaign"
    run = tailscope(
        "run",
        "l2sum",
        "--trials",
        "1",
        "--campaign",
        str(campaign),
        "--no-progress",
        "--no-evidence",
        env=None,
    )
    assert run.returncode == 0, run.stderr
    from tailscope.history.summary import facts_digest, facts_text
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    with connect(Campaign.open(campaign)) as con:
        stored = json.loads(str(con.nodes().iloc[0].facts))
    record = _record(
        _ts("jobs", "epilog", "/unused", "--print", "--state-dir", str(tmp_path / "s"), env=_env())
    )
    assert record["facts_digest"] == facts_digest(facts_text(stored))
