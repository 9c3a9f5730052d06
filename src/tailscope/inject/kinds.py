"""The injector kinds: what each does, what its intensity means, and the cause tailscope should name for it.

One registry (`KINDS`): `tailscope inject`, `tailscope validate` and the scoring read it. The native kinds
run `tsinject MODE` (native/inject/tsinject.c, whose header comment is the manual); `cpu-quota` writes a
cgroup CPU quota and `freq-cap` cpufreq's scaling_max_freq (inject/control.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tailscope.errors import InputError


class InjectInputError(InputError):
    """A bad `inject`/`validate` option or an injector that cannot act on this node (one line, exit 2)."""


@dataclass(frozen=True)
class InjectorKind:
    name: str
    backend: str  # native | cgroup | cpufreq
    intensity: str  # what --intensity means, in words
    default: float
    graded: tuple[float, ...]  # intensities `validate` draws from, weakest first
    expected_cause: str  # the cause tailscope should name for a slowdown this injector made
    fraction: bool = True  # intensity is a fraction in (0, 1]
    needs_cpus: bool = True  # takes --cpus (its threads are pinned there)
    # Where `validate` puts it: "probe" (on the probe's CPUs: it takes their time), "neighbour" (on CPUs
    # beside the probe's: it shares their cache or memory bandwidth, never their time) or "beside" (no
    # pinned threads; the process is kept off the probe's CPUs so that its own CPU time is not counted as
    # contention when it is the memory, not the CPU, it takes).
    placement: str = "probe"
    maximum: float = 1.0  # the largest intensity (1 for fractions)

    def check_intensity(self, value: float) -> float:
        if not 0 < value <= self.maximum:
            expected = "a fraction in (0, 1]" if self.fraction else f"a number in (0, {self.maximum:g}]"
            raise InjectInputError(f"--intensity {value:g}: {self.name} takes {expected} ({self.intensity})")
        return value


KINDS: dict[str, InjectorKind] = {
    k.name: k
    for k in (
        InjectorKind(
            "cpuoccupy",
            "native",
            "fraction of each CPU's time kept busy by a pinned thread",
            0.5,
            (0.2, 0.5, 0.8),
            "cpu-contention",
        ),
        InjectorKind(
            "cachecopy",
            "native",
            "fraction of time a pinned thread copies a last-level-cache-sized buffer",
            0.5,
            (0.3, 0.6, 1.0),
            "cache-contention",
            placement="neighbour",
        ),
        InjectorKind(
            "membw",
            "native",
            "fraction of time a pinned thread streams memory (~ share of its peak bandwidth)",
            0.5,
            (0.3, 0.6, 1.0),
            "memory-bandwidth-contention",
            placement="neighbour",
        ),
        InjectorKind(
            "os-noise",
            "native",
            "timer wake-ups per second per CPU (SCHED_FIFO, 5 us of work each)",
            1000.0,
            (1000.0, 5000.0, 20000.0),
            "os-noise",
            fraction=False,
            maximum=1e6,  # tsinject's own limit: a wake-up per microsecond
        ),
        InjectorKind(
            "memeater",
            "native",
            "fraction of MemAvailable (less a reserve) taken, touched and held",
            0.5,
            (0.5, 0.9),
            "memory-pressure",
            needs_cpus=False,
            placement="beside",
        ),
        InjectorKind(
            "memleak",
            "native",
            "MiB per second of touched memory allocated and never freed",
            64.0,
            (64.0, 256.0),
            "memory-pressure",
            fraction=False,
            needs_cpus=False,
            placement="beside",
            maximum=1 << 20,  # 1 TiB/s: beyond any node's memory bandwidth
        ),
        InjectorKind(
            "memthrash",
            "native",
            "fraction of the free swap taken beyond all of MemAvailable (less a reserve), written in a loop",
            0.5,
            (0.3, 0.6, 0.9),
            "memory-pressure",
            needs_cpus=False,
            placement="beside",
        ),
        InjectorKind(
            "thp-fragment",
            "native",
            "fraction of MemAvailable (less a reserve) fragmented to one locked page per 2 MiB block",
            1.0,
            (1.0,),
            "thp-fallback",
            needs_cpus=False,
            placement="beside",
        ),
        InjectorKind(
            "cpu-quota",
            "cgroup",
            "fraction of CPU time taken away by a cgroup quota (cpu.max, cfs_quota_us)",
            0.5,
            (0.2, 0.5, 0.8),
            "cpu-contention",
        ),
        InjectorKind(
            "freq-cap",
            "cpufreq",
            "fraction of cpuinfo_max_freq taken away (scaling_max_freq = (1-X) max)",
            0.3,
            (0.1, 0.3),
            "frequency",
        ),
    )
}

# The cause vocabulary of `analyze --json` (issue 14); scoring refuses names outside it.
CAUSES = (
    "cpu-contention",
    "os-noise",
    "memory-bandwidth-contention",
    "cache-contention",
    "frequency",
    "memory-pressure",
    "thp-fallback",
    "page-placement",
    "numa-placement",
    "hardware-config",
    "unknown",
)


def kind_named(name: str) -> InjectorKind:
    try:
        return KINDS[name]
    except KeyError:
        raise InjectInputError(f"unknown injector {name!r}; expected one of: {', '.join(KINDS)}") from None
