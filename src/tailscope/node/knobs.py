"""The node settings that move performance run to run, one small class per knob (pyperf `_system.py` style).

Each knob reads its state (None when it cannot be read here: a VM without cpufreq, a missing file) and, when
the state is one that widens or shifts the distribution of results, says what it saw and what to do.
The knobs are recorded with every campaign; the statistics judge, the advice only explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tailscope.node.read import SYS_CPU, bracketed, read_int, read_text

HUGEPAGES = Path("/sys/kernel/mm/hugepages")
THP = Path("/sys/kernel/mm/transparent_hugepage")


@dataclass(frozen=True)
class Knob:
    name: str
    label: str

    def read(self) -> object:
        raise NotImplementedError

    def advice(self, value: object) -> str | None:
        """A sentence saying what was seen and what to do, or None when the state is fine or unknown."""
        return None


class Governor(Knob):
    def read(self) -> str | None:
        return read_text(SYS_CPU / "cpu0" / "cpufreq" / "scaling_governor")

    def advice(self, value: object) -> str | None:
        if value in (None, "performance"):
            return None
        return (
            f"CPU frequency governor is '{value}': frequency ramps add run-to-run noise; for benchmarking "
            "set 'performance' (cpupower frequency-set -g performance)"
        )


class Turbo(Knob):
    def read(self) -> str:
        no_turbo = read_int(SYS_CPU / "intel_pstate" / "no_turbo")
        if no_turbo is not None:
            return "off" if no_turbo else "on"
        boost = read_int(SYS_CPU / "cpufreq" / "boost")
        if boost is not None:
            return "on" if boost else "off"
        return "unknown"

    def advice(self, value: object) -> str | None:
        if value == "on":
            return (
                "turbo is on: results depend on temperature, power and how many cores are busy; node-to-node "
                "spread grows (seed 003: CPUs of lower quality drop frequency). Keep it, but compare nodes "
                "only under the same load, or disable it for calibration runs"
            )
        return None


class ThpEnabled(Knob):
    def read(self) -> str | None:
        return bracketed(read_text(THP / "enabled"))

    def advice(self, value: object) -> str | None:
        if value == "never":
            return (
                "transparent huge pages are off ('never'): the thp page policy will get 4 KiB pages; enable "
                "with echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"
            )
        return None


class ThpDefrag(Knob):
    def read(self) -> str | None:
        return bracketed(read_text(THP / "defrag"))


@dataclass(frozen=True)
class HugePages(Knob):
    size_kb: int = 2048

    def read(self) -> int | None:
        return read_int(HUGEPAGES / f"hugepages-{self.size_kb}kB" / "nr_hugepages")


class PerfEventParanoid(Knob):
    def read(self) -> int | None:
        return read_int("/proc/sys/kernel/perf_event_paranoid")

    def advice(self, value: object) -> str | None:
        if isinstance(value, int) and value > 0:
            return (
                f"perf_event_paranoid is {value}: unprivileged users get only their own processes' counters "
                "(no system-wide or uncore counts); sysctl kernel.perf_event_paranoid=0 or grant CAP_PERFMON"
            )
        return None


class NumaBalancing(Knob):
    def read(self) -> int | None:
        return read_int("/proc/sys/kernel/numa_balancing")

    def advice(self, value: object) -> str | None:
        if value == 1:
            return (
                "automatic NUMA balancing is on: page migration during a run moves data between sockets; "
                "for benchmarking: sysctl kernel.numa_balancing=0"
            )
        return None


class Aslr(Knob):
    def read(self) -> int | None:
        return read_int("/proc/sys/kernel/randomize_va_space")


class IsolatedCpus(Knob):
    def read(self) -> str:
        return read_text(SYS_CPU / "isolated") or ""


KNOBS: tuple[Knob, ...] = (
    Governor("governor", "CPU frequency governor"),
    Turbo("turbo", "turbo / boost"),
    ThpEnabled("thp_enabled", "transparent huge pages"),
    ThpDefrag("thp_defrag", "THP defragmentation"),
    HugePages("hugepages_2m", "reserved 2 MiB pages", 2048),
    HugePages("hugepages_1g", "reserved 1 GiB pages", 1048576),
    PerfEventParanoid("perf_event_paranoid", "perf_event_paranoid"),
    NumaBalancing("numa_balancing", "automatic NUMA balancing"),
    Aslr("aslr", "address-space randomisation"),
    IsolatedCpus("isolated", "isolated CPUs"),
)


def advice(facts: dict[str, object]) -> list[str]:
    """Advice sentences for the knobs in `facts` (as collected), in knob order."""
    out = []
    for knob in KNOBS:
        text = knob.advice(facts.get(knob.name))
        if text:
            out.append(text)
    virt = facts.get("virtualization")
    if virt not in (None, "none"):
        out.append(
            f"this node is a virtual machine ({virt}): no hardware counters and other guests share the host "
            "(for its addresses see the pages advice); use it to test tailscope, not to judge hardware"
        )
    return out
