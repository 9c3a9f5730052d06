"""The probe catalogue: each probe is data — executable, options, headline metric, default time limit.

A *variant* is a probe plus the options the user set (sorted, hashed: ReFrame's display_name/hashcode idea),
so trials of the same variant on different nodes aggregate, and the options stay as columns (`params`).
The command line of every option is documented by the probe itself (docs/probes.md, `PROBE --help`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.errors import InputError
from tailscope.native import native_path

if TYPE_CHECKING:
    from tailscope.store.manifest import Plan

ParamValue = str | int | float | bool


@dataclass(frozen=True)
class ProbeOption:
    """One command-line option of a probe, forwarded verbatim by `tailscope run`."""

    flag: str
    type: type = str  # int, float, str; bool means a flag without a value
    help: str = ""
    choices: tuple[str, ...] | None = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


COMMON_OPTIONS: tuple[ProbeOption, ...] = (
    ProbeOption(
        "--cpus", str, "CPUs, one pinned thread each: 0-3,8 | S0:0-3 | cores (default) | all", None, "LIST"
    ),
    ProbeOption("--page", str, "page policy (default thp)", ("4k", "thp", "2m", "1g")),
    ProbeOption("--offset", str, "start the data BYTES into the allocation (k/m/g suffixes)", None, "BYTES"),
    ProbeOption("--no-pages", bool, "do not record physical pages"),
    ProbeOption("--seed", int, "seed for pseudo-random initialisation"),
    ProbeOption(
        "--events",
        str,
        "count an event set around the timed region: a set name (software, skx, ...) or file",
        None,
        "SET",
    ),
)


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    summary: str
    metric: str
    unit: str
    higher_is_better: bool
    options: tuple[ProbeOption, ...]
    timeout_s: float = 600.0  # per trial, unless the user sets --timeout

    @property
    def all_options(self) -> tuple[ProbeOption, ...]:
        return COMMON_OPTIONS + self.options

    def executable(self) -> Path:
        return native_path(self.name)


PROBES: dict[str, ProbeSpec] = {
    p.name: p
    for p in (
        ProbeSpec(
            "l2sum",
            "L2-contained array summation per pinned thread (the seed's snoop-filter probe)",
            "bandwidth",
            "GB/s",
            True,
            (
                ProbeOption("--l2-fraction", float, "chunk size as a fraction of the private L2 (0.95)"),
                ProbeOption(
                    "--chunk-bytes", str, "chunk size per thread (overrides --l2-fraction)", None, "BYTES"
                ),
                ProbeOption("--sums", int, "passes over each chunk (1000)"),
                ProbeOption("--sums-per-iteration", int, "passes per timed iteration (10)"),
            ),
            timeout_s=300.0,
        ),
        ProbeSpec(
            "stream",
            "STREAM copy/scale/add/triad with every repetition and thread timed",
            "bandwidth",
            "GB/s",
            True,
            (
                ProbeOption("--elements", int, "doubles per array (default: 4x LLC, capped)"),
                ProbeOption("--max-bytes", str, "cap per array (1g)", None, "BYTES"),
                ProbeOption("--reps", int, "repetitions, the first is the warm-up (10; 2 to 250)"),
                ProbeOption(
                    "--stores",
                    str,
                    "non-temporal (nt, default) or ordinary write-allocate stores",
                    ("nt", "cached"),
                ),
            ),
        ),
        ProbeSpec(
            "dgemm",
            "CBLAS DGEMM, every call timed, the first excluded",
            "gflops",
            "GFLOPS",
            True,
            (
                ProbeOption("--n", int, "matrix order (2000)"),
                ProbeOption("--calls", int, "DGEMM calls, the first is the warm-up (10)"),
                ProbeOption("--blas-coretype", str, "auto | library | an OPENBLAS_CORETYPE name (auto)"),
            ),
        ),
        ProbeSpec(
            "fwq",
            "fixed work quantum per pinned core (LLNL FWQ): OS noise and its period",
            "quantum_time",
            "us",
            False,
            (
                ProbeOption("--samples", int, "quanta per thread (5000)"),
                ProbeOption("--quantum-us", float, "target quantum length in microseconds (100)"),
                ProbeOption("--work", int, "loop count per quantum (overrides --quantum-us)"),
            ),
            timeout_s=300.0,
        ),
        ProbeSpec(
            "latency",
            "dependent pointer chase: load latency of L1, L2, L3 and DRAM in ns and cycles",
            "latency",
            "ns",
            False,
            (
                ProbeOption("--loads", int, "dependent loads per timed iteration (65536)"),
                ProbeOption("--iterations", int, "timed iterations per working set (21)"),
                ProbeOption("--sweep", int, "also K working sets per doubling from 4 KiB to DRAM size (0)"),
                ProbeOption("--sizes", str, "explicit working sets: 32k,1m,512m", None, "LIST"),
                ProbeOption("--max-bytes", str, "cap of the DRAM working set (1g)", None, "BYTES"),
                ProbeOption("--clock-chunks", int, "effective-clock chunks before and after (100)"),
            ),
            timeout_s=300.0,
        ),
        ProbeSpec(
            "arith",
            "FP32/FP64 add, mul, div, fma, sqrt latency and throughput in cycles, scalar and widest SIMD",
            "fp64_fma_cpi",
            "cycles",
            False,
            (
                ProbeOption("--ops", int, "operations per chain per iteration (16384)"),
                ProbeOption("--iterations", int, "timed iterations per kernel (31)"),
                ProbeOption("--clock-chunks", int, "effective-clock chunks before and after (200)"),
            ),
            timeout_s=300.0,
        ),
        ProbeSpec(
            "c2c",
            "core-to-core latency: one cache line bounced by CAS between every pair of CPUs",
            "c2c_latency",
            "ns",
            False,
            (
                ProbeOption("--round-trips", int, "round trips per timed iteration (1000)"),
                ProbeOption("--iterations", int, "timed iterations per pair (15)"),
                ProbeOption("--pairs", int, "measure K random pairs instead of all (0: all)"),
            ),
            timeout_s=600.0,
        ),
        ProbeSpec(
            "mpi-p2p",
            "MPI ping-pong between two ranks: one-way latency and bandwidth over message sizes",
            "mpi_latency",
            "us",
            False,
            (
                ProbeOption("--min-bytes", str, "smallest message (1)", None, "BYTES"),
                ProbeOption("--max-bytes", str, "largest message (4m)", None, "BYTES"),
                ProbeOption("--sizes", str, "explicit message sizes: 8,1k,1m", None, "LIST"),
                ProbeOption("--round-trips", int, "round trips per iteration at small sizes (1000)"),
                ProbeOption("--iterations", int, "timed iterations per size (11)"),
            ),
            timeout_s=600.0,
        ),
    )
}


class UnknownProbeError(InputError, KeyError):
    def __str__(self) -> str:
        return f"unknown probe {self.args[0]!r} (known: {', '.join(sorted(PROBES))})"


def probe_spec(name: str) -> ProbeSpec:
    try:
        return PROBES[name]
    except KeyError:
        raise UnknownProbeError(name) from None


@dataclass(frozen=True)
class ProbeVariant:
    """A probe with the options the user set; identity = name + hash of the sorted options."""

    probe: str
    params: dict[str, ParamValue] = field(default_factory=dict)

    @property
    def spec(self) -> ProbeSpec:
        return probe_spec(self.probe)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, separators=(",", ":"))

    @property
    def variant_id(self) -> str:
        import hashlib  # OpenSSL: loaded when a variant is named, not for `tailscope --help`

        digest = hashlib.sha1(f"{self.probe}:{self.params_json}".encode()).hexdigest()[:8]
        return f"{self.probe}-{digest}"

    @property
    def page_policy(self) -> str:
        return str(self.params.get("page", "thp"))

    def argv(self) -> list[str]:
        """The probe's command line (absolute executable path first)."""
        args = [str(self.spec.executable())]
        by_dest = {o.dest: o for o in self.spec.all_options}
        for key in sorted(self.params):
            option = by_dest[key]
            value = self.params[key]
            if option.type is bool:
                if value:
                    args.append(option.flag)
            elif option.flag == "--events":  # a set name stays in params; the probe gets its file
                from tailscope.counters.eventsets import find

                args += [option.flag, str(find(str(value)).resolve())]
            else:
                args += [option.flag, str(value)]
        return args

    def to_plan(self, trials: int) -> Plan:
        from tailscope.store.manifest import Plan

        return Plan(self.variant_id, self.probe, dict(self.params), trials)

    @classmethod
    def from_plan(cls, probe: str, params: dict[str, Any]) -> ProbeVariant:
        return cls(str(probe), dict(params or {}))
