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
from tailscope.store.params import HASH_SPELLING, PARAM_RENAMES, current_params

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
    default: ParamValue | None = None  # what the probe uses when the option is not given
    name: str | None = None  # the parameter's name where it is not the flag's word (--page: page_policy)

    def canonical(self, value: ParamValue) -> ParamValue:
        """The value as the probe reads it: `64M` and `67108864` are one size, `THP` is `thp`."""
        if self.type is bool:
            return bool(value)
        if self.type is int:
            return int(value)
        if self.type is float:
            return float(value)
        if self.metavar == "BYTES":
            return parse_bytes(str(value))
        return str(value).strip().lower() if self.choices else str(value).strip()

    def is_default(self, value: ParamValue) -> bool:
        if self.type is bool:
            return value is False
        if self.default is None:
            return False
        try:
            return self.canonical(value) == self.canonical(self.default)
        except ValueError:
            return False

    @property
    def dest(self) -> str:
        return self.name or self.flag.lstrip("-").replace("-", "_")


COMMON_OPTIONS: tuple[ProbeOption, ...] = (
    ProbeOption(
        "--cpus",
        str,
        "CPUs, one pinned thread each: 0-3,8 | S0:0-3 | cores (default) | all",
        None,
        "LIST",
        default="cores",
    ),
    ProbeOption(
        "--page",
        str,
        "page policy (default thp)",
        ("4k", "thp", "2m", "1g"),
        default="thp",
        name="page_policy",  # one name from the command line to the report (runs.page_policy)
    ),
    ProbeOption(
        "--offset",
        str,
        "start the data BYTES into the allocation (k/m/g suffixes)",
        None,
        "BYTES",
        default="0",
    ),
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
                ProbeOption(
                    "--l2-fraction", float, "chunk size as a fraction of the private L2 (0.95)", default=0.95
                ),
                ProbeOption(
                    "--chunk-bytes", str, "chunk size per thread (overrides --l2-fraction)", None, "BYTES"
                ),
                ProbeOption("--sums", int, "passes over each chunk (1000)", default=1000),
                ProbeOption("--sums-per-iteration", int, "passes per timed iteration (10)", default=10),
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
                ProbeOption("--max-bytes", str, "cap per array (1g)", None, "BYTES", default="1g"),
                ProbeOption(
                    "--reps", int, "repetitions, the first is the warm-up (10; 2 to 250)", default=10
                ),
                ProbeOption(
                    "--stores",
                    str,
                    "non-temporal (nt, default) or ordinary write-allocate stores",
                    ("nt", "cached"),
                    default="nt",
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
                ProbeOption("--n", int, "matrix order (2000)", default=2000),
                ProbeOption("--calls", int, "DGEMM calls, the first is the warm-up (10)", default=10),
                ProbeOption(
                    "--blas-coretype",
                    str,
                    "auto | library | an OPENBLAS_CORETYPE name (auto)",
                    default="auto",
                ),
            ),
        ),
        ProbeSpec(
            "hpl",
            "HPL-Light on one node: LAPACK LU (dgetrf) + solve on dgemm's BLAS, HPL's residual check",
            "gflops",
            "GFLOPS",
            True,
            (
                ProbeOption("--n", int, "order of the system (2000)", default=2000),
                ProbeOption(
                    "--iterations", int, "timed solves (1; 3+ let slow runs be classified)", default=1
                ),
                ProbeOption("--warmup", int, "solves before them, excluded (1)", default=1),
                ProbeOption(
                    "--blas-coretype",
                    str,
                    "auto | library | an OPENBLAS_CORETYPE name (auto)",
                    default="auto",
                ),
            ),
        ),
        ProbeSpec(
            "fwq",
            "fixed work quantum per pinned core (LLNL FWQ): OS noise and its period",
            "quantum_time",
            "us",
            False,
            (
                ProbeOption("--samples", int, "quanta per thread (5000)", default=5000),
                ProbeOption(
                    "--quantum-us", float, "target quantum length in microseconds (100)", default=100.0
                ),
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
                ProbeOption("--clock-chunks", int, "clock chunks before and after each kernel (10)"),
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


_BYTE_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """`64m` -> 67108864 (binary suffixes k, m, g, t; a trailing b or ib is allowed)."""
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    number, suffix = (t[:-1], t[-1]) if t and t[-1] in _BYTE_SUFFIX else (t, "")
    try:
        return int(float(number) * _BYTE_SUFFIX[suffix])
    except ValueError:
        raise ValueError(f"{text!r}: expected a size in bytes like 4096, 64k, 2m or 1g") from None


def bytes_label(n: int) -> str:
    """67108864 -> `64m`: the largest binary suffix that divides the size."""
    for suffix in ("t", "g", "m", "k"):
        if n and n % _BYTE_SUFFIX[suffix] == 0:
            return f"{n // _BYTE_SUFFIX[suffix]}{suffix}"
    return str(n)


def variant_name(probe: str, params: dict[str, Any]) -> str:
    """The human name of a variant: `l2sum`, `l2sum 2m`, `l2sum 1g +64m`, `dgemm n=4000`.

    The page policy comes first as a bare word, the offset as +SIZE, other options as key=value; options at
    their default are not named (they are not part of the variant either).
    """
    if probe.startswith("app:"):  # an application (`run -- CMD`): named by its own environment
        return " ".join([probe, *(str(e) for e in params.get("env", []))])
    parts = [probe]
    options = {o.dest: o for o in PROBES[probe].all_options} if probe in PROBES else {}
    rest = {k: v for k, v in params.items() if not (k in options and options[k].is_default(v))}
    if "page_policy" in rest:
        parts.append(str(rest.pop("page_policy")))
    if "offset" in rest:
        raw = rest.pop("offset")
        try:
            parts.append(f"+{bytes_label(parse_bytes(str(raw)))}")
        except ValueError:
            parts.append(f"+{raw}")
    for key in sorted(rest):
        value = rest[key]
        parts.append(key.replace("_", "-") if value is True else f"{key.replace('_', '-')}={value}")
    return " ".join(parts)


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
    """A probe with the options that change what it runs; identity = name + hash of the sorted options.

    Options given at their default value are dropped, so `run l2sum` and `run l2sum --page thp` are one
    variant (the probe ran with the same configuration). `name` is the human name (`l2sum 1g +64m`);
    `variant_id` (`l2sum-059c3207`) stays the stored key.
    """

    probe: str
    params: dict[str, ParamValue] = field(default_factory=dict)
    # False keeps the params as given: a plan stored before defaults were dropped keeps its variant id.
    normalize: bool = field(default=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        if any(k in PARAM_RENAMES for k in self.params):
            object.__setattr__(self, "params", current_params(self.params))
        if not self.normalize:
            return
        by_dest = {o.dest: o for o in probe_spec(self.probe).all_options} if self.probe in PROBES else {}
        kept = {k: v for k, v in self.params.items() if not (k in by_dest and by_dest[k].is_default(v))}
        object.__setattr__(self, "params", kept)

    @property
    def name(self) -> str:
        return variant_name(self.probe, self.params)

    @property
    def spec(self) -> ProbeSpec:
        return probe_spec(self.probe)

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, separators=(",", ":"))

    @property
    def variant_id(self) -> str:
        import hashlib  # OpenSSL: loaded when a variant is named, not for `tailscope --help`

        # the id hashes the params as first stored (HASH_SPELLING): renaming a parameter keeps every id
        hashed = {HASH_SPELLING.get(k, k): v for k, v in self.params.items()}
        text = json.dumps(hashed, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha1(f"{self.probe}:{text}".encode()).hexdigest()[:8]
        return f"{self.probe}-{digest}"

    @property
    def page_policy(self) -> str:
        """The page policy the probe runs with: the option's value, else its default (thp)."""
        return str(self.params.get("page_policy", "thp"))

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
        """The variant of a stored plan, its params as stored: a plan made before options at their default
        were dropped (`--page thp` hashed into the id) keeps its variant id and still resumes."""
        return cls(str(probe), dict(params or {}), normalize=False)
