"""Run the native probes (native/probes/*.c) and read their JSON lines (docs/probes.md).

The executables are found with `tailscope.native.native_path`: the installed package's `_native/bin`, or
`$TAILSCOPE_NATIVE_DIR` (e.g. `build/dev/native` after `cmake --build build/dev`) during development.
Output is read with the project's own reader (`tailscope.probes.parse`), so these tests also pin the
contract between the probes and the Python side; `ProbeRun.records` keeps every line in order for the
checks the reader does not make (record order, keys, values).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tailscope.native import NativeMissingError, native_path
from tailscope.probes.parse import ProbeOutput, parse_probe_output

PROBES = ("l2sum", "stream", "dgemm", "hpl", "fwq", "latency", "arith", "c2c")

# Keys every config record carries (docs/probes.md, "config").
CONFIG_KEYS = (
    "record",
    "probe",
    "probe_version",
    "cpus",
    "threads_requested",
    "threads",
    "page_policy",
    "page_size",
    "offset",
    "tsc_hz",
    "tsc_hz_source",
    "timer_resolution_ns",
    "timer_overhead_ns",
    "timer_overhead_cycles",
    "hostname",
    "params",
)
ITERATION_KEYS = (
    "kernel",
    "iteration",
    "thread",
    "cpu",
    "warmup",
    "seconds",
    "value",
    "tsc_start",
    "tsc_end",
    "mono_start_ns",
    "mono_end_ns",
)
RESULT_KEYS = (
    "metric",
    "unit",
    "value",
    "higher_is_better",
    "seconds",
    "tsc_start",
    "tsc_end",
    "mono_start_ns",
    "mono_end_ns",
    "realtime_start_ns",
    "summary",
)
# Record kinds in the order they must appear.
ORDER = ("config", "warning", "pages", "iteration", "validation", "result")
ERROR_LINE = re.compile(r"^(l2sum|stream|dgemm|hpl|fwq|latency|arith|c2c|mpi-p2p): error: \S.*$")

HUGEPAGES_2M = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
HUGEPAGES_1G = Path("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")


@dataclass
class ProbeRun:
    """One finished probe process."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    records: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["record"] == kind]

    @property
    def config(self) -> dict[str, Any]:
        return self.records[0]

    @property
    def params(self) -> dict[str, Any]:
        return self.records[0]["params"]

    @property
    def result(self) -> dict[str, Any]:
        (result,) = self.of("result")
        return result

    def warnings(self, code: str) -> list[str]:
        return [w["message"] for w in self.of("warning") if w["code"] == code]

    def parsed(self) -> ProbeOutput:
        return parse_probe_output(self.stdout, name=self.argv[0])


def _decode(stdout: str) -> list[dict[str, Any]]:
    records = []
    for lineno, line in enumerate(stdout.splitlines(), start=1):
        record = json.loads(line)  # every line is one JSON object
        assert isinstance(record, dict) and "record" in record, f"line {lineno}: {line[:80]}"
        records.append(record)
    return records


def check_order(records: list[dict[str, Any]]) -> None:
    """config first, then warnings, pages, iterations, validation, result (each kind may be absent)."""
    ranks = [ORDER.index(r["record"]) for r in records]
    assert ranks and ranks[0] == 0, "the first record must be config"
    assert ranks.count(0) == 1, "exactly one config record"
    assert ranks == sorted(ranks), [r["record"] for r in records]
    assert ranks.count(ORDER.index("result")) <= 1


def run_probe(
    name: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    expect: int | None = 0,
    preexec: Callable[[], None] | None = None,
    timeout: float = 120,
    text_output: bool = False,
) -> ProbeRun:
    """Run probe `name` with args; decode stdout (unless text_output, e.g. --help); check the exit code
    (unless expect is None)."""
    try:
        exe = native_path(name)
    except NativeMissingError as exc:
        pytest.fail(str(exc))
    full_env = dict(os.environ)
    full_env.pop("TAILSCOPE_TEST_CORRUPT", None)
    full_env.pop("TAILSCOPE_KERNEL_ISA", None)
    full_env.update(env or {})
    argv = [str(exe), *args]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        preexec_fn=preexec,
        check=False,
    )
    records = [] if text_output else _decode(proc.stdout)
    run = ProbeRun(argv, proc.returncode, proc.stdout, proc.stderr, records)
    if expect is not None:
        assert proc.returncode == expect, f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr}"
    if proc.returncode == 0:
        if not text_output:
            check_order(run.records)
        assert proc.stderr == "", proc.stderr  # warnings go to stderr only on a terminal
    else:
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, f"exactly one line on stderr, got {lines}"
        assert ERROR_LINE.match(lines[0]), lines[0]
    return run


@pytest.fixture
def probe() -> Callable[..., ProbeRun]:
    """`probe("l2sum", "--sums", "100")` runs a probe and returns its ProbeRun."""
    return run_probe


def online_cpus() -> list[int]:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    allowed = os.sched_getaffinity(0)
    return [c for c in cpus if c in allowed]


def one_thread_per_core() -> list[int]:
    """What `--cpus cores` (every probe's default) picks: the lowest allowed online thread of each physical
    core, socket by socket, cores by their lowest CPU (native/common/ts_topo.c's node order), from sysfs as
    node.topology reads it: on hosts that number SMT siblings next to each other, or alternate sockets, this
    is not the first CPUs."""
    from tailscope.node.topology import read_sysfs

    topo = read_sysfs()
    picks: dict[tuple[int, int], int] = {}
    for cpu in sorted(online_cpus()):
        pu = topo.pus[cpu]
        picks.setdefault((pu.package or 0, pu.core), cpu)
    return [picks[key] for key in sorted(picks)]


def cpu_flags() -> set[str]:
    """This CPU's flags as the node facts read them (node.facts.cpu_flags, /proc/cpuinfo's first CPU)."""
    from tailscope.node.facts import cpu_flags as flags

    return set(flags())


def is_root() -> bool:
    return os.geteuid() == 0


def _reserve(path: Path, count: int) -> None:
    path.write_text(f"{count}\n")


@pytest.fixture
def hugepages() -> Iterator[Callable[[int, int], None]]:
    """reserve(n2m, n1g): reserve hugetlb pages (root); always reset both pools to 0 afterwards."""
    if not is_root():
        pytest.skip("reserving huge pages needs root")

    def reserve(n2m: int, n1g: int) -> None:
        _reserve(HUGEPAGES_2M, n2m)
        if n1g:
            if not HUGEPAGES_1G.exists():
                pytest.skip("this kernel has no 1 GiB huge pages")
            _reserve(HUGEPAGES_1G, n1g)
        got = (int(HUGEPAGES_2M.read_text()), int(HUGEPAGES_1G.read_text()) if n1g else 0)
        if got != (n2m, n1g):
            pytest.skip(f"could reserve only {got} huge pages of ({n2m}, {n1g}): memory too fragmented")

    try:
        yield reserve
    finally:
        _reserve(HUGEPAGES_2M, 0)
        if HUGEPAGES_1G.exists():
            _reserve(HUGEPAGES_1G, 0)


@pytest.fixture
def no_hugepages() -> None:
    """Skip unless no hugetlb pages are reserved (the error path needs an empty pool)."""
    for path in (HUGEPAGES_2M, HUGEPAGES_1G):
        if path.exists() and int(path.read_text()) != 0:
            pytest.skip(f"{path} is not 0: huge pages are reserved on this machine")
