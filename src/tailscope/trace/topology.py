"""CPU -> socket and NUMA node -> socket from sysfs (a fixture root in tests: a 2- or 4-socket node), as the
one Topology model (node/topology.py; hwloc's XML fills the same model with cores, L3s and dies)."""

from __future__ import annotations

from pathlib import Path

from tailscope.node.topology import PU, Topology
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


def read_topology(root: Path | None = None) -> Topology:
    """Read /sys (or `root`, a tree with devices/system/{cpu,node}) into a Topology."""
    sys_root = Path(root) if root else Path("/sys")
    cpu_dir = sys_root / "devices/system/cpu"
    topo = _SysfsTopology()
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
    pus = {
        cpu: PU(cpu, core=cpu, l3=None, die=None, package=socket, numa=topo.cpu_node.get(cpu))
        for cpu, socket in sorted(topo.cpu_socket.items())
    }
    return Topology(pus, source=str(sys_root), numa_sockets=topo.node_socket)


class _SysfsTopology:
    """What sysfs says, collected file by file before the Topology is made."""

    def __init__(self) -> None:
        self.cpu_socket: dict[int, int] = {}
        self.cpu_node: dict[int, int] = {}
        self.node_socket: dict[int, int] = {}  # -1: a node without CPUs (memory only)
