"""Where the cgroup CPU controller is: cgroup v2 (cpu.max) when the unified hierarchy has it, else v1.

On this VM (hybrid mount) the cpu controller is bound to the v1 hierarchy /sys/fs/cgroup/cpu and the v2 mount
/sys/fs/cgroup/unified has only hugetlb, so cpu-quota uses cpu.cfs_quota_us / cpu.cfs_period_us here.

Finding the hierarchy changes nothing (validate asks it without the node lock). Where the v2 root has the cpu
controller but does not hand it to its children, `CpuHierarchy.enable` names the root's
cgroup.subtree_control: the injection writes `+cpu` there itself, under the node lock, after a journal entry
that writes `-cpu` back (inject/control.py), so the node is put back however the run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailscope.inject.kinds import InjectInputError

MOUNTS = Path("/proc/self/mounts")


@dataclass(frozen=True)
class CpuHierarchy:
    version: int  # 1 or 2
    root: Path  # mount point of the hierarchy holding the cpu controller
    enable: Path | None = None  # v2: the root's cgroup.subtree_control when cpu is not enabled for children

    def quota_files(self, group: Path, quota_us: int, period_us: int) -> list[tuple[Path, str]]:
        """The files to write (in order) for `quota_us` of CPU time every `period_us`."""
        if self.version == 2:
            return [(group / "cpu.max", f"{quota_us} {period_us}\n")]
        return [
            (group / "cpu.cfs_period_us", f"{period_us}\n"),
            (group / "cpu.cfs_quota_us", f"{quota_us}\n"),
        ]

    def cgroup_of(self, pid: int) -> Path:
        """The directory of the cgroup `pid` is in, in this hierarchy (/proc/PID/cgroup)."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except FileNotFoundError:
            raise InjectInputError(f"cpu-quota: no process {pid}") from None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if (self.version == 2 and controllers == "") or (
                self.version == 1 and "cpu" in controllers.split(",")
            ):
                return self.root / path.lstrip("/")
        raise InjectInputError(f"cpu-quota: /proc/{pid}/cgroup names no cgroup of {self.root}")


def cpu_hierarchy(mounts: Path | None = None) -> CpuHierarchy:
    """The v2 hierarchy when its root lists the cpu controller, else the v1 hierarchy mounted with cpu. Reads
    only: a v2 root that does not enable cpu for its children is said in `enable`, never written here."""
    v1: Path | None = None
    for line in (mounts or MOUNTS).read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            controllers = where / "cgroup.controllers"
            if controllers.exists() and "cpu" in controllers.read_text().split():
                subtree = where / "cgroup.subtree_control"
                enabled = "cpu" in subtree.read_text().split()
                return CpuHierarchy(2, where, None if enabled else subtree)
        elif fstype == "cgroup" and "cpu" in options:
            v1 = where
    if v1 is not None:
        return CpuHierarchy(1, v1)
    raise InjectInputError("cpu-quota: no cgroup hierarchy with the cpu controller is mounted")
