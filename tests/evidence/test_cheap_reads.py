"""The cheaper reading path gives the same evidence: kept-open files re-read with pread, parsers limited to
the probe's CPUs, threads read through /proc/TID/task/TID, co-runners re-read through kept descriptors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tailscope.evidence import interrupts, procstat, sched, vmstat
from tailscope.evidence.corunners import CorunnerTracker
from tailscope.evidence.procfile import ProcFile

FIX = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_procfile_reads_all_of_a_multi_page_file_and_a_fresh_copy_each_time(tmp_path: Path) -> None:
    maps = ProcFile("/proc/self/maps")  # longer than one seq_file buffer (a page) in a Python process
    first = maps.read()
    assert first is not None and len(first) > 4096
    assert first.splitlines()[0] == Path("/proc/self/maps").read_text().splitlines()[0]
    f = tmp_path / "value"
    f.write_text("1\n")
    kept = ProcFile(str(f))
    assert kept.read() == "1\n"
    with f.open("r+") as fh:  # rewritten in place, as sysfs and /proc change under a kept descriptor
        fh.write("22\n")
    assert kept.read() == "22\n"
    assert ProcFile(str(tmp_path / "absent")).read() is None
    stat = ProcFile("/proc/self/stat")

    def cpu_ticks() -> int:
        fields = (stat.read() or "").rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime

    start = cpu_ticks()
    for _ in range(2000):  # until a 10 ms tick of CPU time shows through the kept descriptor
        sum(range(100_000))
        if cpu_ticks() > start:
            break
    assert cpu_ticks() > start


def test_parsers_limited_to_the_probe_cpus_agree_with_the_whole_file() -> None:
    for name in ("proc_interrupts.before", "proc_interrupts.after", "/proc/interrupts"):
        raw = Path(name).read_text() if name.startswith("/") else text(name)
        whole = interrupts.parse(raw)
        for cpus in ({0}, {1}, {0, 1}, set()):
            part = interrupts.parse(raw, cpus)
            assert part.total == {c: v for c, v in whole.total.items() if c in cpus}
            assert part.local_timer == {c: v for c, v in whole.local_timer.items() if c in cpus}
    short = "           CPU0       CPU1\n  0:  5  7  IO-APIC 2-edge timer\nNMI:  3\nERR:  9\n"
    assert interrupts.parse(short, {0}).total == {0: 8} and interrupts.parse(short, {1}).total == {1: 7}
    for name in ("proc_stat.before", "proc_stat.after"):
        whole = procstat.parse(text(name))
        assert procstat.parse(text(name), [1]) == {1: whole[1]}
        assert procstat.parse(text(name), [7]) == {}


def test_vmstat_finds_the_same_keys_as_splitting_every_line() -> None:
    for name in ("proc_vmstat.before", "proc_vmstat.after"):
        raw = text(name)
        every = vmstat.parse(raw)
        assert vmstat.parse_wanted(raw) == {k: every[k] for k in vmstat.KEYS if k in every}
    first = "thp_fault_alloc 5\nnuma_hit 7\nnr_free_pages 3"  # a key on the first line, none at the end
    assert vmstat.parse_wanted(first) == {"thp_fault_alloc": 5, "numa_hit": 7}


def test_a_worker_thread_read_through_its_own_directory_is_that_thread() -> None:
    """/proc/TID/stat of a thread sums the whole process; /proc/TID/task/TID/stat, read here, is the
    thread's own: the worker's page faults are its own, not the main thread's."""
    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def worker() -> None:
        tid.append(threading.get_native_id())
        bytearray(64 << 20)  # 16k pages touched by this thread
        ready.set()
        done.wait()

    t = threading.Thread(target=worker)
    t.start()
    try:
        ready.wait(10)
        pid = os.getpid()
        mine = sched.read_task(pid, tid[0])
        main = sched.read_task(pid, pid)
        assert mine is not None and main is not None and mine.tid == tid[0]
        own = Path(f"/proc/{pid}/task/{tid[0]}/stat").read_text()
        assert mine.minflt >= 8000  # the 64 MiB it touched (4 KiB pages, some may be huge)
        assert abs(mine.minflt - sched.parse_stat(own)["minflt"]) <= 100
        assert mine.migrations is None or mine.migrations >= 0
    finally:
        done.set()
        t.join()


def test_active_corunners_are_re_read_through_kept_descriptors_and_a_dead_one_reads_as_gone() -> None:
    hog = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: sum(range(10000))"])
    try:
        tracker = CorunnerTracker()
        tracker.start()
        tracker.active = {hog.pid}
        first = tracker._read_active(hog.pid)
        assert first is not None and first.pid == hog.pid
        tracker.sample()
        assert hog.pid in tracker._files
    finally:
        hog.kill()
        hog.wait()
    assert tracker._read_active(hog.pid) is None  # reaped: the kept descriptor does not read a new process


def _write_stat(proc: Path, pid: int, comm: str, ticks: int, processor: int) -> None:
    # after "(comm) ": utime is rest[11], stime rest[12], starttime rest[19], processor rest[36]
    rest = ["S"] + ["0"] * 40
    rest[11], rest[12], rest[19], rest[36] = str(ticks), "0", "1234", str(processor)
    (proc / str(pid)).mkdir(exist_ok=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) " + " ".join(rest) + "\n")
    (proc / str(pid) / "cmdline").write_bytes(comm.encode() + b"\0")


def test_a_multithreaded_corunner_never_takes_more_than_the_probe_cpus(tmp_path: Path) -> None:
    """/proc/PID/stat's CPU is the main thread's, its ticks all threads': a 2-thread process whose main
    thread sits on the probe's one CPU was named with 103% of it. The share is capped at the whole CPU."""
    _write_stat(tmp_path, 4242, "stream", 0, 0)
    tracker = CorunnerTracker(proc=tmp_path, ticks_per_s=100.0, clock=lambda: 100.0)
    tracker.start()
    tracker.baseline_at -= 1.0  # the baseline was read a second ago
    _write_stat(tmp_path, 4242, "stream", 200, 0)  # 2 s of CPU in 1 s: two busy threads
    (row,) = tracker.finish(exclude=set(), cpus=[0], wall_s=0.5, scan_now=True)
    assert row.comm == "stream" and row.share == pytest.approx(1.0)
    assert row.cpu_s == pytest.approx(0.5)


def test_a_corunner_younger_than_the_baseline_scan_is_scaled_over_its_own_life(tmp_path: Path) -> None:
    """A co-runner that started 0.4 s into a 10 s quiet spell (no scan since) took 35% of the probe CPUs in
    the first busy trial; its 0.2 s of CPU time were spread over the 10 s since the scan and read as 0.7%
    (below the 1% row limit: the trial's cause sentence said "other activity" instead of its name)."""
    # the clock stands still: the spans are the ones set here, however long this busy machine takes between
    # the calls (a real second passing between them made 1.0 s read as 1.013 s)
    tracker = CorunnerTracker(proc=tmp_path, ticks_per_s=100.0, boot_clock=lambda: 12.74, clock=lambda: 100.0)
    tracker.start()
    tracker.baseline_at -= 10.0  # the last scan: 10 s ago, before the co-runner existed
    _write_stat(tmp_path, 4242, "stress-ng-cpu", 20, 1)  # started at 1234 ticks = 12.34 s after boot
    (row,) = tracker.finish(exclude=set(), cpus=[0, 1], wall_s=0.1, scan_now=True)
    # 0.2 s of CPU in its 0.4 s of life: 0.05 s of the trial's 0.1 s, a quarter of two CPUs
    assert row.comm == "stress-ng-cpu" and row.cpu_s == pytest.approx(0.05)
    assert row.share == pytest.approx(0.25)
    # an old process (in the baseline) keeps the span since the scan
    tracker.baseline_at -= 1.0
    _write_stat(tmp_path, 4242, "stress-ng-cpu", 40, 1)
    (row,) = tracker.finish(exclude=set(), cpus=[0, 1], wall_s=0.1, scan_now=True)
    assert row.cpu_s == pytest.approx(0.2 * 0.1 / 1.0, rel=0.01)


def test_a_busy_trial_between_scans_names_a_process_started_since_the_last_scan(tmp_path: Path) -> None:
    """Between full scans a busy trial re-read only the processes busiest at the last scan: a co-runner that
    started in a quiet spell went unnamed until the scan credit allowed the next full scan (seen: the first
    3 of 37 trials of a stress-ng window with no stress-ng row). Processes the baseline does not know are
    read too, and re-read while the spell lasts."""
    _write_stat(tmp_path, 100, "sshd", 5, 1)
    tracker = CorunnerTracker(proc=tmp_path, ticks_per_s=100.0, boot_clock=lambda: 12.74, clock=lambda: 100.0)
    tracker.start()
    tracker.baseline_at -= 5.0
    assert tracker.finish(exclude=set(), cpus=[1], wall_s=0.1, scan_now=False, busy=True) == []
    _write_stat(tmp_path, 4242, "stress-ng-cpu", 20, 1)  # started 0.4 s ago, after the scan
    _write_stat(tmp_path, 4243, "probe", 30, 1)  # the probe itself: excluded
    tracker.start()
    (row,) = tracker.finish(exclude={4243}, cpus=[1], wall_s=0.1, scan_now=False, busy=True)
    assert (row.pid, row.comm) == (4242, "stress-ng-cpu") and row.share == pytest.approx(0.5)
    assert 4242 in tracker.active and 4243 not in tracker.active
    # a quiet trial reads nothing
    tracker.start()
    assert tracker.finish(exclude=set(), cpus=[1], wall_s=0.1, scan_now=False, busy=False) == []
