"""Helpers of the trace tests: the jacobi source, its pragma lines, fake sysfs topologies."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JACOBI = REPO / "native" / "ompt" / "jacobi.c"
FIXTURES = Path(__file__).parent / "fixtures"
COMPILERS = {"gcc": ["gcc"], "clang": ["clang-14", "clang"]}


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
