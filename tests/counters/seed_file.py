"""A replayed seed-sampler file (notes/seed-formats.md), written by hand so metrics can be checked by
arithmetic.

2 sockets, 4 logical CPUs (socket = cpu % 2, as the seed's `lproc = 2*core + socket`), 2 IMC channels and 2
CHAs
per socket, 3 samples 1 s apart (TSC_ratio 21: 2.1 GHz). Chosen so that, over samples 0..2 (2 s):
- cpu 0: dInst 8e9 (wrapping at 2^48), dCore 4e9, dRef 3.15e9 -> GHz 4/3.15 x 2.1 = 2.6667, IPC 2, halted 0.25
- socket 0: CAS reads 3e6 (channel 0 wraps at 2^48) and writes 1e6 -> 192e6 B / 2 s = 0.096 GB/s read,
  0.032 GB/s write; ACT 1.2e6, PRE_COUNT.MISS 0.4e6 -> conflict 0.4/4 = 0.1, miss 0.8/4 = 0.2, hit 0.7
- CHA 1 of socket 0: SF_EVICTION.M_STATE 75 -> 80 -> 95: 20
- RAPL package energy of socket 0 wraps at 2^32: 4294967000 -> 1000 -> 2000: 2296 units
"""

from __future__ import annotations

W48 = 2**48
W32 = 2**32
TSC0 = 25370245187777968
GHZ = 2.1


def values() -> dict[str, list[int]]:
    """Series (as written, without the sample index) -> values of samples 0, 1, 2."""
    v: dict[str, list[int]] = {}
    v["tsc"] = [TSC0, TSC0 + 2_100_000_000, TSC0 + 4_200_000_000]
    v["walltime[0]"] = [1532379481, 1532379482, 1532379483]
    v["walltime[1]"] = [80968, 80968, 80968]
    for s in (0, 1):
        v[f"rapl_pkg_energy[{s}]"] = [4294967000, 1000, 2000] if s == 0 else [10, 20, 30]
        v[f"pkg_therm_status[{s}]"] = [0x88390800, 0x88390800, 0x88410800]
    for cpu in range(4):
        base = 10**12 * (cpu + 1)
        inst = (
            [W48 - 1_000_000_000, 3_000_000_000, 7_000_000_000]
            if cpu == 0
            else [base, base + 10**9, base + 2 * 10**9]
        )
        v[f'core_fixed_counts[{cpu}]["Inst_Retired.Any"]'] = inst
        v[f'core_fixed_counts[{cpu}]["CPU_CLK_Unhalted.Core"]'] = [base, base + 2 * 10**9, base + 4 * 10**9]
        v[f'core_fixed_counts[{cpu}]["CPU_CLK_Unhalted.Ref"]'] = [
            base,
            base + 1_575_000_000,
            base + 3_150_000_000,
        ]
        v[f'core_counts[{cpu}]["L2_LINES_IN.ALL"]'] = [5, 10, 20]
    for s in (0, 1):
        for ch in (0, 1):
            imc = f"imc_counts[{s}][{ch}]"
            reads = [W48 - 100, 999_900, 1_999_900] if (s, ch) == (0, 0) else [0, 500_000, 1_000_000]
            v[f'{imc}["CAS_COUNT.READS"]'] = reads
            v[f'{imc}["CAS_COUNT.WRITES"]'] = [0, 250_000, 500_000]
            v[f'{imc}["ACT.ALL"]'] = [100, 300_100, 600_100]
            v[f'{imc}["PRE_COUNT.MISS"]'] = [7, 100_007, 200_007]
        for cha in (0, 1):
            v[f'cha_counts[{s}][{cha}]["SF_EVICTION.M_STATE"]'] = (
                [75, 80, 95] if (s, cha) == (0, 1) else [1, 1, 2]
            )
    return v


HEADER = [
    "TSC_ratio = 21",
    "nr_cpus = 4",
    "Reference_TSC = 25370245177304324",
    "Reference_WallTime = 1532379481.075971",
    *(f"IA32_FIXED_CTR_CTRL[{c}] = 0x333" for c in range(4)),
    "RAPL_PKG_ENERGY_UNIT = 0.000061035",
]


def text(samples: int = 3) -> str:
    lines = list(HEADER)
    series = values()
    for s in range(samples):
        for name, vals in series.items():
            value = vals[s]
            shown = hex(value) if name.startswith("pkg_therm_status") else str(value)
            lines.append(f"{name}[{s}] = {shown}")
    return "\n".join(lines) + "\n"


def big_text(samples: int, cpus: int = 96, chas: int = 24, channels: int = 6, seed: int = 1) -> str:
    """A file of the seed's size per sample (~1,100 series on a 2-socket node), for fuzzing and the bench."""
    import random

    rnd = random.Random(seed)
    names = ["tsc", "walltime[0]", "walltime[1]"]
    names += [
        f'core_fixed_counts[{c}]["{e}"]'
        for c in range(cpus)
        for e in ("Inst_Retired.Any", "CPU_CLK_Unhalted.Core", "CPU_CLK_Unhalted.Ref")
    ]
    names += [
        f'core_counts[{c}]["{e}"]'
        for c in range(cpus)
        for e in ("L2_LINES_IN.ALL", "L2_RQSTS.MISS", "CYCLE_ACTIVITY.STALLS_L2_MISS", "L1D.REPLACEMENT")
    ]
    names += [
        f'cha_counts[{s}][{c}]["{e}"]'
        for s in (0, 1)
        for c in range(chas)
        for e in ("SF_EVICTION.M_STATE", "SF_EVICTION.E_STATE", "SF_EVICTION.S_STATE", "LLC_LOOKUP.DATA_READ")
    ]
    names += [
        f'imc_counts[{s}][{c}]["{e}"]'
        for s in (0, 1)
        for c in range(channels)
        for e in ("CAS_COUNT.READS", "CAS_COUNT.WRITES", "ACT.ALL", "PRE_COUNT.MISS", "DCLK")
    ]
    names += [f"rapl_pkg_energy[{s}]" for s in (0, 1)] + [f"pkg_therm_status[{s}]" for s in (0, 1)]
    state = {n: rnd.randrange(0, W48 // 2) for n in names}
    state["tsc"] = TSC0
    state["walltime[0]"] = 1532379481
    state["walltime[1]"] = 0
    for n in names:
        if n.startswith("rapl"):
            state[n] = rnd.randrange(0, W32)
        if n.startswith("pkg_therm"):
            state[n] = 0x88390800
    out = []
    for s in range(samples):
        for n in names:
            value = state[n]
            out.append(f"{n}[{s}] = {hex(value) if n.startswith('pkg_therm') else value}")
        for n in names:
            if n == "tsc":
                state[n] += 2_100_000_000
            elif n == "walltime[0]":
                state[n] += 1
            elif n.startswith("walltime") or n.startswith("pkg_therm"):
                continue
            elif n.startswith("rapl"):
                state[n] = (state[n] + rnd.randrange(0, 10**7)) % W32
            else:
                state[n] = (state[n] + rnd.randrange(0, 10**9)) % W48
    return "\n".join(HEADER + out) + "\n"
