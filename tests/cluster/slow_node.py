"""One node of the test cluster made slow from outside its jobs: every process of a job that one slurmd
starts gets at most a quarter of a CPU, and a quarter of the weight of any other process group when the
machine is busy (a cgroup CPU quota and weight; both, so the node is slower on a quiet machine and on a
loaded one alike).

The jobs know nothing of it (they never read their node's name). slurmd itself, and the prolog and epilog it
runs, are not limited: slurmd is moved into a cgroup of its own (no limits), and a watcher moves every
process of that cgroup that descends from a slurmstepd (a job's) into the limited one, where the job's later
processes are born. cgroup v1 (the cpu hierarchy) or v2 (a root with the cpu controller); `available()` says
why not where neither can be used.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

V1_CPU = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
POLL_S = 0.01


def _hierarchy() -> tuple[Path, bool] | None:
    """(root, is_v1) of a cpu cgroup hierarchy this process may make children in."""
    if (V1_CPU / "cpu.shares").exists() and os.access(V1_CPU, os.W_OK):
        return V1_CPU, True
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split() and os.access(V2_ROOT, os.W_OK):
        return V2_ROOT, False
    return None


def available() -> str | None:
    """None where a node can be slowed here, else why not."""
    if os.geteuid() != 0:
        return "needs root to make cgroups"
    if _hierarchy() is None:
        return "no writable cgroup cpu hierarchy (v1 /sys/fs/cgroup/cpu or v2 with the cpu controller)"
    return None


def _ppid_comm(pid: int) -> tuple[int, str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    close = text.rindex(")")
    return int(text[close + 2 :].split()[1]), text[text.index("(") + 1 : close]


def _in_a_job(pid: int, slurmd: int) -> bool:
    for _ in range(32):
        found = _ppid_comm(pid)
        if found is None or pid in (slurmd, 1, 0):
            return False
        ppid, comm = found
        if comm == "slurmstepd":
            return True
        pid = ppid
    return False


class SlowJobs:
    def __init__(self, slurmd_pid: int, *, cpu_share: float = 0.25, weight_share: float = 0.25) -> None:
        found = _hierarchy()
        if found is None:
            raise RuntimeError(available() or "no cgroup hierarchy")
        self.root, self.v1 = found
        self.slurmd = slurmd_pid
        self.cpu_share, self.weight_share = cpu_share, weight_share
        self.origin = self._cgroup_of(slurmd_pid)  # where its processes go back to
        self.home = self.root / f"tailscope-test-slurmd-{slurmd_pid}"
        self.slow = self.root / f"tailscope-test-jobs-{slurmd_pid}"
        self.moved: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="slow-node", daemon=True)

    def _cgroup_of(self, pid: int) -> Path:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if (self.v1 and "cpu" in controllers.split(",")) or (not self.v1 and controllers == ""):
                return self.root / path.lstrip("/")
        return self.root

    def _limit(self) -> None:
        if self.v1:
            period = int((self.slow / "cpu.cfs_period_us").read_text())
            (self.slow / "cpu.cfs_quota_us").write_text(str(int(period * self.cpu_share)))
            (self.slow / "cpu.shares").write_text(str(int(1024 * self.weight_share)))
        else:
            with contextlib.suppress(OSError):  # already enabled, or enabled by whoever made the root
                (self.root / "cgroup.subtree_control").write_text("+cpu")
            (self.slow / "cpu.max").write_text(f"{int(100_000 * self.cpu_share)} 100000")
            (self.slow / "cpu.weight").write_text(str(max(1, int(100 * self.weight_share))))

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                pids = [int(p) for p in (self.home / "cgroup.procs").read_text().split()]
            except OSError:
                continue
            for pid in pids:
                if pid != self.slurmd and _in_a_job(pid, self.slurmd):
                    with contextlib.suppress(OSError):  # it ended meanwhile
                        (self.slow / "cgroup.procs").write_text(str(pid))
                        self.moved.add(pid)

    def __enter__(self) -> SlowJobs:
        self.home.mkdir()
        self.slow.mkdir()
        try:
            self._limit()
            (self.home / "cgroup.procs").write_text(str(self.slurmd))
        except OSError:
            self._undo()
            raise
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self._undo()

    def _undo(self) -> None:
        """Every process back where slurmd was, both cgroups removed."""
        for group in (self.home, self.slow):
            if not group.exists():
                continue
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        (self.origin / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                group.rmdir()
