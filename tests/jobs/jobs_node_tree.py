"""A node's /proc and /sys as files under a directory (`tailscope jobs prolog|epilog --root DIR`), built from
the real files in fixtures/ (README there) and sysfs files written in the kernel's formats; `advance`
changes them the way a kernel would between a job's start and end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from installed import tailscope_env

FIXTURES = Path(__file__).parent / "fixtures"
TICKS = os.sysconf("SC_CLK_TCK")
# Two CPUs in one package; cpu1 has the files too (the package count is the same on both, as on hardware)
CPUS = (0, 1)


def stat_line(pid: int, comm: str, ticks: int, starttime: int) -> str:
    """/proc/PID/stat as fs/proc/array.c writes it (utime in field 14, starttime in field 22)."""
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560", "100", "0", "0", "0"]
    fields += [str(ticks), "0", "0", "0", "20", "0", "1", "0", str(starttime), "3133440", "360"]
    fields += ["18446744073709551615"] + ["0"] * 14 + ["1", "0", "0", "0", "0", "0"]
    return f"{pid} ({comm}) " + " ".join(fields) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def build(root: Path, *, interrupts: str = "proc_interrupts.intel", thermal: bool = True) -> Path:
    proc, cpu = root / "proc", root / "sys" / "devices" / "system" / "cpu"
    for name in ("buddyinfo", "loadavg", "stat", "vmstat"):
        write(proc / name, (FIXTURES / f"proc_{name}").read_text())
    write(proc / "interrupts", (FIXTURES / interrupts).read_text())
    write(cpu / "online", "0-1\n")
    for n in CPUS:
        write(cpu / f"cpu{n}" / "topology" / "physical_package_id", "0\n")
        write(cpu / f"cpu{n}" / "cpufreq" / "scaling_cur_freq", f"{2_400_000 + 100_000 * n}\n")
        write(cpu / f"cpu{n}" / "cpufreq" / "scaling_max_freq", "3500000\n")
        if thermal:
            tt = cpu / f"cpu{n}" / "thermal_throttle"
            write(tt / "core_throttle_count", f"{5 + n}\n")
            write(tt / "core_throttle_total_time_ms", "120\n")
            write(tt / "package_throttle_count", "40\n")
            write(tt / "package_throttle_total_time_ms", "900\n")
    mc = root / "sys" / "devices" / "system" / "edac" / "mc"
    for n in (0, 1):
        write(mc / f"mc{n}" / "ce_count", "2\n")
        write(mc / f"mc{n}" / "ue_count", "0\n")
    write(root / "sys" / "kernel" / "mm" / "transparent_hugepage" / "hpage_pmd_size", "2097152\n")
    return root


def add_process(
    root: Path, pid: int, comm: str, cpu_s: float, started_s: float, cgroup: str = "0::/\n"
) -> None:
    """A process that has used `cpu_s` of CPU time and started `started_s` after boot."""
    write(
        root / "proc" / str(pid) / "stat",
        stat_line(pid, comm, round(cpu_s * TICKS), round(started_s * TICKS)),
    )
    write(root / "proc" / str(pid) / "cgroup", cgroup)


def bump(path: Path, by: int) -> None:
    path.write_text(f"{int(path.read_text().split()[0]) + by}\n")


def bump_row(path: Path, row: str, by: int) -> None:
    """Add `by` to CPU0's count of one /proc/interrupts row."""
    text = path.read_text()
    pattern = re.compile(rf"^({row}:\s+)(\d+)", re.MULTILINE)
    path.write_text(pattern.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + by:>{len(m.group(2))}}", text, 1))


def bump_vmstat(path: Path, key: str, by: int) -> None:
    text = path.read_text()
    path.write_text(
        re.sub(
            rf"^{key} (\d+)$", lambda m: f"{key} {int(m.group(1)) + by}", text, count=1, flags=re.MULTILINE
        )
    )


def tailscope(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    """`python -m tailscope ARGS`: the tailscope this process imported, with `env` (default: os.environ)."""
    return subprocess.run(
        [sys.executable, "-m", "tailscope", *args],
        capture_output=True,
        text=True,
        env=tailscope_env(env),
        timeout=timeout,
    )
