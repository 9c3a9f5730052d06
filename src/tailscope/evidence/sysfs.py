"""Per-CPU files under /sys/devices/system/cpu: cpufreq and thermal throttling.

- cpuN/cpufreq/scaling_cur_freq (kHz): the frequency the governor last set (read at the end of a trial).
- cpuN/thermal_throttle/core_throttle_count: times the core was throttled (x86 with the therm_throt driver).
A file that does not exist leaves its value out (None), never zero. (cpuidle residency is not used for busy
time: a state's time is only added when the CPU leaves it, so a CPU idle at a reading hides its idle time.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYS_CPU = Path("/sys/devices/system/cpu")


_absent: set[Path] = set()  # files found missing once are not tried again (a VM has none of them)


def _int(path: Path) -> int | None:
    if path in _absent:
        return None
    try:
        return int(path.read_text().split()[0])
    except FileNotFoundError:
        _absent.add(path)
        return None
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class CpuSysfs:
    cpufreq_khz: int | None
    throttle_count: int | None


_NONE = CpuSysfs(None, None)
_cpus_without: set[tuple[Path, int]] = set()  # CPUs that had neither file: not looked at again


def read_cpu(cpu: int, root: Path = SYS_CPU, *, with_freq: bool = True) -> CpuSysfs:
    if (root, cpu) in _cpus_without:  # checked before any path is built: a VM reads nothing per trial
        return _NONE
    base = root / f"cpu{cpu}"
    found = CpuSysfs(
        cpufreq_khz=_int(base / "cpufreq" / "scaling_cur_freq") if with_freq else None,
        throttle_count=_int(base / "thermal_throttle" / "core_throttle_count"),
    )
    if with_freq and found == _NONE:
        _cpus_without.add((root, cpu))
    return found


def read(cpus: list[int], root: Path = SYS_CPU, *, with_freq: bool = True) -> dict[int, CpuSysfs]:
    no = _cpus_without
    return {cpu: _NONE if (root, cpu) in no else read_cpu(cpu, root, with_freq=with_freq) for cpu in cpus}
