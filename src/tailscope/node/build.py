"""What this installation went without, and what running without root costs: said once, here.

The native build records the optional libraries it did not find in `tailscope/_native/build.json`
(CMakeLists.txt writes it: libpfm4, a system BLAS, LAPACK, MPI, omp-tools.h); hwloc's `lstopo` is read at run
time, never linked, and the otf2 Python package is optional where it has no wheel (aarch64): their absence is
seen here. `tailscope facts`, the nodes table's facts (and so the report's caveat) and the README's list all
come from `limits()`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

# What each absence costs, in the user's words, by the names build.json uses: (what is missing, its cost).
BUILD_COSTS = {
    "libpfm4": ("libpfm4", "events are resolved from the kernel's sysfs names and raw encodings only (no "
                "libpfm4 names such as INST_RETIRED:ANY_P)"),
    "system-blas": ("a system BLAS", "OpenBLAS comes from PyPI (scipy-openblas32): dgemm and hpl measure "
                    "that build of OpenBLAS"),
    "lapack": ("LAPACK", "no hpl probe"),
    "mpi": ("MPI", "no mpi-p2p probe"),
    "omp-tools.h": ("omp-tools.h (LLVM OpenMP)", "no OMPT tool: `tailscope trace` cannot run"),
}
HWLOC = ("hwloc (lstopo-no-graphics)", "core-to-core groups come from sysfs (core, L3, package) only")
OTF2 = (
    "the otf2 Python package",
    "`tailscope trace` writes no OTF2 archive, only its Chrome JSON (aarch64 has no otf2 wheel: "
    "pip install 'tailscope[otf2]' builds it)",
)
ROOT_COSTS = (
    "no physical frame numbers from /proc/self/pagemap (page placement and slice hashing are not judged)",
    "no 2 MiB / 1 GiB huge-page pools are reserved (--page 2m/1g need pools an administrator made)",
    "no fault injectors, validate or node-state changes",
)


def build_record(native_bin: Path | None = None) -> dict[str, Any]:
    """build.json of the installed native programs ({} where there is none: a development tree)."""
    if native_bin is None:
        from tailscope.native import native_dir

        native_bin = native_dir()
    try:
        return json.loads((native_bin.parent / "build.json").read_text())
    except (OSError, ValueError):
        return {}


def perf_event_paranoid() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def limits(record: dict[str, Any] | None = None, *, euid: int | None = None) -> dict[str, Any]:
    """The facts `build_missing` (library -> what its absence costs) and `privilege_costs` (what running
    without root costs here; empty as root)."""
    record = build_record() if record is None else record
    missing: dict[str, str] = {}
    for item in record.get("missing", []):
        name, cost = BUILD_COSTS.get(str(item), (str(item), "see the build log"))
        missing[name] = cost
    if shutil.which("lstopo-no-graphics") is None and shutil.which("lstopo") is None:
        missing[HWLOC[0]] = HWLOC[1]
    if importlib.util.find_spec("otf2") is None:
        missing[OTF2[0]] = OTF2[1]
    costs: list[str] = []
    if (os.geteuid() if euid is None else euid) != 0:
        costs.extend(ROOT_COSTS)
        paranoid = perf_event_paranoid()
        if paranoid is not None and paranoid >= 2:
            costs.append(
                f"perf_event_paranoid is {paranoid}: user-space counters of tailscope's own processes only "
                "(no kernel counts, no system-wide or uncore counters)"
            )
    return {"build_missing": missing, "privilege_costs": costs}


def limit_lines(facts: dict[str, Any]) -> list[str]:
    """One line per missing library and per cost of running without root, for `facts` and the report."""
    lines = [f"built without {name}: {cost}" for name, cost in (facts.get("build_missing") or {}).items()]
    lines.extend(f"not root: {cost}" for cost in facts.get("privilege_costs") or [])
    return lines
