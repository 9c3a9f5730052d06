"""The one model of where each CPU sits: core, L3, die, package (socket) and NUMA node.

Built from hwloc's XML where hwloc is there (node/hwloc.py: dies and L3 groups on every vendor, NUMA
distances) or from sysfs alone (trace/topology.py: sockets and NUMA nodes, a fixture tree in tests). A level
a source does not know is None (a PU's l3, die) or absent.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PU:
    os_index: int
    core: int
    l3: int | None  # gp_index of the L3Cache ancestor (None: no L3, or not known)
    die: int | None  # os_index of the Die ancestor (None: hwloc found no dies)
    package: int | None
    numa: int | None  # os_index of the NUMA node holding its memory


@dataclass
class Topology:
    pus: dict[int, PU] = field(default_factory=dict)
    numa_distances: dict[tuple[int, int], int] = field(default_factory=dict)
    source: str = ""
    # NUMA node -> socket, every node including those without CPUs (-1: memory only); empty: derive from pus
    numa_sockets: dict[int, int] = field(default_factory=dict)

    def shared(self, a: int, b: int) -> str:
        """The innermost level CPUs a and b share (node.hwloc.LEVELS)."""
        x, y = self.pus[a], self.pus[b]
        if x.core == y.core:
            return "core"
        if x.l3 is not None and x.l3 == y.l3:
            return "l3"
        if x.die is not None and x.die == y.die and x.package == y.package:
            return "die"
        if x.package is not None and x.package == y.package:
            return "package"
        return "machine"

    @property
    def cpu_socket(self) -> dict[int, int]:
        return {cpu: pu.package for cpu, pu in self.pus.items() if pu.package is not None}

    @property
    def cpu_node(self) -> dict[int, int]:
        return {cpu: pu.numa for cpu, pu in self.pus.items() if pu.numa is not None}

    @property
    def node_socket(self) -> dict[int, int]:
        """NUMA node -> the lowest socket of its CPUs (-1: a node without CPUs)."""
        if self.numa_sockets:
            return dict(self.numa_sockets)
        out: dict[int, int] = {}
        for pu in self.pus.values():
            if pu.numa is not None and pu.package is not None:
                out[pu.numa] = min(out.get(pu.numa, pu.package), pu.package)
        return out

    @property
    def sockets(self) -> list[int]:
        return sorted(set(self.cpu_socket.values()))

    @property
    def nodes(self) -> list[int]:
        return sorted(self.node_socket)

    def socket_of_cpu(self, cpu: int) -> int:
        return self.cpu_socket.get(cpu, -1)

    def socket_of_node(self, node: int) -> int:
        return self.node_socket.get(node, -1)
