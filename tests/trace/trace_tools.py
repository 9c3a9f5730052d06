"""Helpers of the trace tests: OpenMP programs built with each compiler, their pragma lines, otf2-print,
fake sysfs topologies."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JACOBI = REPO / "native" / "ompt" / "jacobi.c"
FIXTURES = Path(__file__).parent / "fixtures"
COMPILERS = {"gcc": ["gcc"], "clang": ["clang-14", "clang"]}
needs_otf2_print = pytest.mark.skipif(
    shutil.which("otf2-print") is None, reason="otf2-print (Debian otf2-tools) not installed"
)


def build_openmp(compiler: str, source: Path, binary: Path) -> Path:
    """`source` built -O2 -g -fopenmp into `binary` by `compiler` (a key of COMPILERS); skip without it."""
    cc = next((shutil.which(c) for c in COMPILERS[compiler] if shutil.which(c)), None)
    if cc is None:
        pytest.skip(f"{compiler} not installed (Debian: see packaging/debian-packages-test.txt)")
    subprocess.run([cc, "-O2", "-g", "-fopenmp", "-o", str(binary), str(source)], check=True)
    return binary


def otf2_definitions(archive: Path) -> str:
    """`otf2-print -G`: the archive's global definitions (regions, locations) as text."""
    return subprocess.run(
        ["otf2-print", "-G", str(archive)], check=True, capture_output=True, text=True
    ).stdout


def pragma_lines(source: Path, text: str) -> list[int]:
    """Line numbers of the pragmas containing `text` in `source`."""
    return [
        n for n, line in enumerate(source.read_text().splitlines(), 1) if "#pragma" in line and text in line
    ]


def make_sysfs(root: Path, sockets: int, cpus_per_socket: int) -> Path:
    """A sysfs tree with `sockets` packages and one NUMA node per socket (node N holds socket N's CPUs)."""
    for s in range(sockets):
        cpus = list(range(s * cpus_per_socket, (s + 1) * cpus_per_socket))
        for c in cpus:
            d = root / "devices/system/cpu" / f"cpu{c}/topology"
            d.mkdir(parents=True)
            (d / "physical_package_id").write_text(f"{s}\n")
        node = root / "devices/system/node" / f"node{s}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(f"{cpus[0]}-{cpus[-1]}\n" if len(cpus) > 1 else f"{cpus[0]}\n")
    return root
