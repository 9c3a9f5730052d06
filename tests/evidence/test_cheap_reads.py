"""The cheaper reading path gives the same evidence: kept-open files re-read with pread, parsers limited to
the probe's CPUs, threads read through /proc/TID/task/TID, co-runners re-read through kept descriptors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

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
