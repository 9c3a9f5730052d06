"""The trial process is read before it is reaped: its threads while it runs, its main thread as a zombie."""

from __future__ import annotations

import os
import sys

import pytest

from tailscope.evidence.process import run_watched
from tailscope.evidence.sched import TaskTracker, read_task
from tailscope.native import native_path


def test_zombie_is_read_before_the_reap_and_workers_while_running():
    trackers: dict[str, TaskTracker] = {}
    at_exit: dict[str, object] = {}

    def sample(pid: int) -> None:
        trackers.setdefault("t", TaskTracker(pid)).sample()

    def exited(pid: int) -> None:
        # the process has exited but is not reaped: /proc/PID is a zombie with only its main thread
        with open(f"/proc/{pid}/stat") as fh:
            at_exit["state"] = fh.read().rsplit(")", 1)[1].split()[0]
        at_exit["tasks"] = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        at_exit["main"] = read_task(pid, pid)
        trackers.setdefault("t", TaskTracker(pid)).sample(final=True)

    argv = [str(native_path("l2sum")), "--cpus", "0,1", "--sums", "2000", "--no-pages"]
    done = run_watched(argv, 60, on_sample=sample, on_exit=exited)
    assert done.returncode == 0 and not done.timed_out
    tracker = trackers["t"]
    pid = tracker.pid
    assert at_exit["state"] == "Z"
    assert at_exit["tasks"] == [pid]
    main = at_exit["main"]
    assert main is not None and main.run_ns > 0
    assert tracker.final == {pid}
    # the worker thread was seen while it ran (the probe printed after its timed region, workers alive)
    assert len(tracker.last) == 2
    # after the reap the process is gone and the whole process's rusage came back: at least what the threads
    # had used when last read (rusage counts every thread, the dead worker too)
    assert not os.path.exists(f"/proc/{pid}/stat")
    assert done.rusage is not None
    total = done.rusage.ru_utime + done.rusage.ru_stime
    sampled = sum(s.run_ns for s in tracker.last.values()) / 1e9
    assert total >= sampled - 0.002  # rusage has microseconds
    assert '"record":"result"' in done.stdout


def test_timeout_kills_and_reaps():
    done = run_watched([sys.executable, "-c", "import time; time.sleep(30)"], 0.3, on_sample=lambda pid: None)
    assert done.timed_out
    assert done.returncode == -9
    assert done.wall_s < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(done.pid, os.WNOHANG)  # reaped: neither alive nor a zombie
    assert not os.path.exists(f"/proc/{done.pid}")


def test_output_of_both_streams_and_the_exit_code():
    code = "import sys; print('x' * 100000); print('err', file=sys.stderr); sys.exit(3)"
    done = run_watched([sys.executable, "-c", code], 30)
    assert done.returncode == 3 and not done.timed_out
    assert done.stdout.strip() == "x" * 100000
    assert done.stderr.strip() == "err"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_visit_outside_the_main_threads_final_affinity_is_not_a_trial_cpu():
    """hwloc's CPUID probe (OpenMPI's MPI_Init under `taskset -c 1 lmp`) moves the main thread across every
    CPU for a moment, then restores its mask: LAMMPS trials read CPUs '0-1' instead of '1'. The trial's
    CPUs are where the main thread was seen within the affinity it exited with: read from a real zombie."""
    first, second = sorted(os.sched_getaffinity(0))[:2]
    code = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{first}}}); t = time.time()\n"
        "while time.time() - t < 0.05: pass\n"  # the visit
        f"os.sched_setaffinity(0, {{{second}}}); t = time.time()\n"
        "while time.time() - t < 0.1: pass\n"
    )
    trackers: dict[str, TaskTracker] = {}

    def exited(pid: int) -> None:
        tracker = trackers.setdefault("t", TaskTracker(pid))
        tracker.cpus_seen[pid] = [first]  # what a sample during the visit records (samples are timing-bound)
        tracker.sample(final=True)

    done = run_watched([sys.executable, "-c", code], 60, on_exit=exited)
    assert done.returncode == 0
    tracker = trackers["t"]
    assert tracker.main_allowed == {second}  # the zombie's Cpus_allowed_list
    assert tracker.cpus_seen[tracker.pid] == [first, second]
    assert tracker.cpus() == [second]
    tracker.main_allowed = set()  # where the mask cannot be read, every CPU seen counts, as before
    assert tracker.cpus() == [first, second]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_a_visit_outside_another_processes_final_affinity_is_not_a_trial_cpu(tmp_path):
    """OpenMPI's orted (a child of `lmp`) runs hwloc's probe too: on a busy node it waited on the other CPU
    long enough for a sample to see it there, and the live LAMMPS test stored CPUs '0-1' for `taskset -c 1`.
    Every process of the tree is kept within the affinity it had as the trial's process exited."""
    from tailscope.launch import launch

    first, second = sorted(os.sched_getaffinity(0))[:2]
    back = tmp_path / "back"
    child = (
        "import os, time\n"
        f"os.sched_setaffinity(0, {{{first}}}); t = time.time()\n"
        "while time.time() - t < 0.4: pass\n"  # the visit, long enough for several samples to see it
        f"os.sched_setaffinity(0, {{{second}}})\n"
        f"open({str(back)!r}, 'w').close()\n"
        "while True: time.sleep(0.01)\n"  # alive when the trial's process exits, as orted is
    )
    root = (
        "import os, subprocess, sys, time\n"
        f"os.sched_setaffinity(0, {{{second}}})\n"
        f"subprocess.Popen([sys.executable, '-c', {child!r}])\n"
        f"while not os.path.exists({str(back)!r}): pass\n"
        "t = time.time()\n"
        "while time.time() - t < 0.3: pass\n"
    )
    tracker: list[TaskTracker] = []

    def sample(pid: int, others) -> None:
        tracker[:] = tracker or [TaskTracker(pid)]
        tracker[0].sample(others=others)

    def exited(pid: int, others) -> None:
        tracker[:] = tracker or [TaskTracker(pid)]
        tracker[0].sample(final=True, others=others)

    done = launch([sys.executable, "-c", root], timeout_s=120, on_line=lambda s, line: None,
                  on_sample=sample, on_exit=exited, sample_interval_s=0.05)  # fmt: skip
    assert done.returncode == 0 and not done.timed_out
    t = tracker[0]
    (other,) = t.pids - {t.pid}
    assert [seen for tid, seen in t.cpus_seen.items() if tid != t.pid and first in seen], t.cpus_seen
    assert t.cpus() == [second]  # the child's visit does not count
    assert t.allowed_of[other] == {second}
