"""Per-CPU files under /sys/devices/system/cpu: cpufreq and thermal throttling.

- cpuN/cpufreq/scaling_cur_freq (kHz): the frequency the governor last set (read at the end of a trial);
  scaling_max_freq (kHz): the highest it may set now (a power cap or an administrator lowers it).
- cpuN/thermal_throttle/core_throttle_count: times the core was throttled (x86 with the therm_throt driver);
  package_throttle_count the same for its package (every CPU of a package shows its package's count), and
  {core,package}_throttle_total_time_ms (Linux 5.17+) the time spent throttled.
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


THROTTLE_FILES = (
    "core_throttle_count",
    "core_throttle_total_time_ms",
    "package_throttle_count",
    "package_throttle_total_time_ms",
)


def throttle_totals(cpus: list[int], root: Path = SYS_CPU) -> dict[str, int]:
    """Node-wide thermal throttling: the core files summed over `cpus`, the package files once per package
    (by topology/physical_package_id); {} where the kernel has no thermal_throttle directory (AMD, a VM)."""
    if not cpus or not (root / f"cpu{cpus[0]}" / "thermal_throttle").is_dir():
        return {}
    totals: dict[str, int] = {}
    packages: set[int | None] = set()
    for cpu in cpus:
        base = root / f"cpu{cpu}"
        package = _int(base / "topology" / "physical_package_id")
        first_of_package = package not in packages
        packages.add(package)
        for name in THROTTLE_FILES:
            if name.startswith("package") and not first_of_package:
                continue
            value = _int(base / "thermal_throttle" / name)
            if value is not None:
                totals[name] = totals.get(name, 0) + value
    return totals


def frequency_limits(cpus: list[int], root: Path = SYS_CPU) -> dict[int, int]:
    """cpuN/cpufreq/scaling_max_freq (kHz) of each CPU that has one."""
    out = {}
    for cpu in cpus:
        value = _int(root / f"cpu{cpu}" / "cpufreq" / "scaling_max_freq")
        if value is not None:
            out[cpu] = value
    return out
