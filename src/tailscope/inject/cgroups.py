"""Where the cgroup CPU controller is: cgroup v2 (cpu.max) when the unified hierarchy has it, else v1.

On this VM (hybrid mount) the cpu controller is bound to the v1 hierarchy /sys/fs/cgroup/cpu and the v2 mount
/sys/fs/cgroup/unified has only hugetlb, so cpu-quota uses cpu.cfs_quota_us / cpu.cfs_period_us here.
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


def cpu_hierarchy(mounts: Path = MOUNTS) -> CpuHierarchy:
    """The v2 hierarchy when its root lists the cpu controller, else the v1 hierarchy mounted with cpu."""
    v1: Path | None = None
    for line in mounts.read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            controllers = where / "cgroup.controllers"
            if controllers.exists() and "cpu" in controllers.read_text().split():
                subtree = where / "cgroup.subtree_control"
                if "cpu" not in subtree.read_text().split():
                    try:
                        subtree.write_text("+cpu\n")
                    except OSError as exc:
                        raise InjectInputError(
                            f"cpu-quota: cannot enable cpu in {subtree}: {exc.strerror}"
                        ) from exc
                return CpuHierarchy(2, where)
        elif fstype == "cgroup" and "cpu" in options:
            v1 = where
    if v1 is not None:
        return CpuHierarchy(1, v1)
    raise InjectInputError("cpu-quota: no cgroup hierarchy with the cpu controller is mounted")
