"""CPU -> socket and NUMA node -> socket from sysfs (a fixture root in tests: a 2- or 4-socket node)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tailscope.trace.errors import TraceInputError


def parse_cpulist(text: str, where: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; a bad list names the file."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        try:
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError as exc:
            raise TraceInputError(f"{where}: bad CPU list {text.strip()!r} (expected e.g. 0-3,8)") from exc
    return cpus


@dataclass
class Topology:
    """Where each CPU and each NUMA node sits; `nodes_of_socket` for the placement matrix's labels."""

    cpu_socket: dict[int, int] = field(default_factory=dict)
    cpu_node: dict[int, int] = field(default_factory=dict)
    node_socket: dict[int, int] = field(default_factory=dict)  # -1: a node without CPUs (memory only)

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


def read_topology(root: Path | None = None) -> Topology:
    """Read /sys (or `root`, a tree with devices/system/{cpu,node}) into a Topology."""
    sys_root = Path(root) if root else Path("/sys")
    cpu_dir = sys_root / "devices/system/cpu"
    topo = Topology()
    for d in sorted(cpu_dir.glob("cpu[0-9]*")):
        pkg = d / "topology/physical_package_id"
        if pkg.is_file():
            try:
                topo.cpu_socket[int(d.name[3:])] = int(pkg.read_text().strip())
            except ValueError as exc:
                raise TraceInputError(f"{pkg}: expected an integer socket id") from exc
    if not topo.cpu_socket:
        raise TraceInputError(f"{cpu_dir}: no cpu*/topology/physical_package_id (is this a sysfs tree?)")
    node_dir = sys_root / "devices/system/node"
    for d in sorted(node_dir.glob("node[0-9]*")):
        node = int(d.name[4:])
        cpulist = d / "cpulist"
        cpus = parse_cpulist(cpulist.read_text(), str(cpulist)) if cpulist.is_file() else []
        for cpu in cpus:
            topo.cpu_node[cpu] = node
        sockets = {topo.cpu_socket[c] for c in cpus if c in topo.cpu_socket}
        topo.node_socket[node] = min(sockets) if sockets else -1
    if not topo.node_socket:  # a kernel without NUMA: one node holding everything
        topo.node_socket[0] = min(topo.cpu_socket.values())
        topo.cpu_node = dict.fromkeys(topo.cpu_socket, 0)
    return topo
