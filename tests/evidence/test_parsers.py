"""The evidence parsers on real /proc files recorded on the development VM (fixtures/README.md), and on
cpufreq/thermal_throttle files written in the kernel's format."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.evidence import corunners, interrupts, procstat, sched, sysfs, vmstat

FIX = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_proc_stat_per_cpu_states_add_up_to_the_elapsed_time():
    before, after = procstat.parse(text("proc_stat.before")), procstat.parse(text("proc_stat.after"))
    assert sorted(before) == [0, 1]  # the aggregate "cpu" line is not a CPU
    first = next(line for line in text("proc_stat.before").splitlines() if line.startswith("cpu0 "))
    assert list(before[0]) == [int(x) for x in first.split()[1:]]
    for cpu in (0, 1):
        d = procstat.delta_seconds(before, after, cpu, ticks_per_s=100)
        assert set(d) == {f for f in procstat.REPORTED}
        assert all(v >= 0 for v in d.values())
        # the files were read 0.3 s apart: every state of one CPU together spans that (10 ms ticks, and
        # the two `cat`s and the shell took a little more)
        assert 0.28 <= sum(d.values()) <= 0.45
    assert procstat.delta_seconds(before, after, 7) == {}


def test_interrupts_sum_every_per_cpu_line_and_keep_the_local_timer_apart():
    raw = text("proc_interrupts.before")
    parsed = interrupts.parse(raw)
    assert sorted(parsed.total) == [0, 1]
    # LOC line of the fixture, read independently of the parser
    loc = next(line for line in raw.splitlines() if line.strip().startswith("LOC:")).split()[1:3]
    assert parsed.local_timer == {0: int(loc[0]), 1: int(loc[1])}
    expected = {0: 0, 1: 0}
    for line in raw.splitlines()[1:]:
        name, _, rest = line.partition(":")
        if name.strip() in ("ERR", "MIS"):
            continue  # one system-wide number, not CPU 0's
        toks = rest.split()
        for cpu in (0, 1):
            if len(toks) > cpu and toks[cpu].isdigit():
                expected[cpu] += int(toks[cpu])
    assert parsed.total == expected
    after = interrupts.parse(text("proc_interrupts.after"))
    assert all(after.total[c] >= parsed.total[c] for c in (0, 1))
    assert after.local_timer[0] > parsed.local_timer[0]  # 0.3 s of a running tick


def test_interrupts_system_wide_lines_are_not_charged_to_cpu0():
    raw = (
        "           CPU0       CPU1\n  0:  5  7  IO-APIC 2-edge timer\nLOC:  100  200  Local timer\nERR:  9\n"
    )
    parsed = interrupts.parse(raw)
    assert parsed.total == {0: 105, 1: 207}
    assert parsed.local_timer == {0: 100, 1: 200}


def test_arm_arch_timer_is_the_local_timer():
    raw = (
        "           CPU0       CPU1\n"
        " 11:  4000  5000  GICv3  30 Level  arch_timer\n"
        " 12:  1  2  GICv3  27 Level  kvm\n"
    )
    assert interrupts.parse(raw).local_timer == {0: 4000, 1: 5000}


def test_vmstat_deltas_keep_the_contract_keys_the_kernel_has():
    before, after = vmstat.parse(text("proc_vmstat.before")), vmstat.parse(text("proc_vmstat.after"))
    d = vmstat.deltas(before, after)
    assert set(d) <= set(vmstat.KEYS)
    assert {"thp_fault_alloc", "thp_fault_fallback", "numa_hit", "pgmajfault"} <= set(d)
    line = next(x for x in text("proc_vmstat.after").splitlines() if x.startswith("numa_hit "))
    line0 = next(x for x in text("proc_vmstat.before").splitlines() if x.startswith("numa_hit "))
    assert d["numa_hit"] == int(line.split()[1]) - int(line0.split()[1]) > 0
    # a key this kernel lacks is absent, not zero
    assert "nr_bogus" not in vmstat.deltas({"nr_bogus": 1}, {"nr_bogus": 2})


def test_task_files():
    run, delay, slices = sched.parse_schedstat(text("task_schedstat"))
    assert run > 0 and delay > 0 and slices > 0
    stat_text = text("task_stat")
    fields = sched.parse_stat(stat_text)
    raw = stat_text.split()
    assert fields["minflt"] == int(raw[9]) and fields["majflt"] == int(raw[11])
    assert fields["utime"] == int(raw[13]) and fields["processor"] == int(raw[38])
    vol, invol = sched.parse_status_switches(text("task_status"))
    svol, sinvol = sched.parse_sched_switches(text("task_sched"))
    assert vol is not None and invol is not None and invol > 0
    # status and sched were read one after the other: the same counters, give or take the read itself
    assert abs(svol - vol) <= 2 and abs(sinvol - invol) <= 2
    assert sched.parse_sched_migrations(text("task_sched")) == 1


@pytest.mark.parametrize("comm", ["a b", "x) (y", "((", ")"])
def test_stat_with_a_hostile_command_name(comm):
    after = ["0"] * 50  # fields 3.. of proc(5): field k at index k - 3
    for k, v in {3: "R", 10: "11", 12: "12", 14: "30", 15: "40", 22: "777", 39: "1"}.items():
        after[k - 3] = v
    line = f"4242 ({comm}) " + " ".join(after)
    fields = sched.parse_stat(line)
    assert (fields["minflt"], fields["majflt"], fields["utime"], fields["stime"]) == (11, 12, 30, 40)
    assert fields["starttime"] == 777 and fields["processor"] == 1
    info = corunners.parse_stat(line, 4242)
    assert info.comm == comm and info.cpu_ticks == 70 and info.processor == 1
    assert sched.parse_comm(line) == comm


def test_cpufreq_and_thermal_throttle_where_present(tmp_path):
    sysfs._absent.clear()
    sysfs._cpus_without.clear()
    before = sysfs.read([0, 1], FIX / "sys_cpu_before")
    after = sysfs.read([0, 1], FIX / "sys_cpu_after")
    assert after[0].cpufreq_khz == 2100000
    assert (before[0].throttle_count, after[0].throttle_count) == (17, 23)
    assert after[1] == sysfs.CpuSysfs(None, None)  # absent, never zero
    assert sysfs.read([0], tmp_path)[0] == sysfs.CpuSysfs(None, None)
