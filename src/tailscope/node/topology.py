"""The one model of where each CPU sits: core, cluster, L3, die, package (socket) and NUMA node.

Built from hwloc's XML where hwloc is there (node/hwloc.py: dies and L3 groups on every vendor, Arm clusters
as hwloc's Cluster groups, NUMA distances) or from sysfs alone (`read_sysfs` here: core, cluster, L3, die,
package and NUMA node from /sys/devices/system/{cpu,node}, a fixture tree in tests). A level a source does
not know is None (a PU's cluster, l3, die) or absent.

A cluster is what Linux calls one (topology/cluster_cpus_list, kernel >= 5.16): on Arm the 4-core CCL of
Kunpeng 920 (seed 003: intra-CCL core-to-core latency far below inter-CCL), on x86 the cores of one L2 where
the kernel says so; it is used only where it holds more than one core and fewer than the L3 does.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class PU:
    os_index: int
    core: int
    l3: int | None  # gp_index of the L3Cache ancestor (None: no L3, or not known)
    die: int | None  # os_index of the Die ancestor (None: hwloc found no dies)
    package: int | None
    numa: int | None  # os_index of the NUMA node holding its memory
    cluster: int | None = None  # cluster id (Arm CCL; None: none, or no wider than a core or the L3)


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
        if x.cluster is not None and x.cluster == y.cluster:
            return "cluster"
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


def read_sysfs(root: Path | None = None) -> Topology:
    """The topology sysfs gives (`root`: a tree with devices/system/{cpu,node}; default /sys): per CPU its
    core (core_cpus_list, thread_siblings_list, else package + core_id), cluster, L3 (the level-3 cache
    index's shared_cpu_list), die, package and NUMA node. ValueError names a file that cannot be read."""
    sys_root = Path(root) if root else Path("/sys")
    cpu_dir = sys_root / "devices/system/cpu"
    cpus = sorted(int(d.name[3:]) for d in cpu_dir.glob("cpu[0-9]*") if (d / "topology").is_dir())
    if not cpus:
        raise ValueError(f"{cpu_dir}: no cpu*/topology (is this a sysfs tree?)")
    numa: dict[int, int] = {}
    node_socket: dict[int, int] = {}
    for d in sorted((sys_root / "devices/system/node").glob("node[0-9]*")):
        cpulist = d / "cpulist"
        for cpu in _cpu_list(cpulist) if cpulist.is_file() else []:
            numa[cpu] = int(d.name[4:])
    pus: dict[int, PU] = {}
    cluster_sizes: dict[int, int] = {}
    l3_sizes: dict[int, int] = {}
    for cpu in cpus:
        t = cpu_dir / f"cpu{cpu}" / "topology"
        package = _int(t / "physical_package_id")
        core_set = _first_list(t / "core_cpus_list", t / "thread_siblings_list")
        core = min(core_set) if core_set else (package or 0) * 100000 + (_int(t / "core_id") or cpu)
        cluster_set = _first_list(t / "cluster_cpus_list")
        l3_set = _l3_cpus(cpu_dir / f"cpu{cpu}" / "cache")
        cluster = min(cluster_set) if cluster_set else None
        l3 = min(l3_set) if l3_set else None
        if cluster is not None:
            cluster_sizes[cluster] = len(cluster_set)
        if l3 is not None:
            l3_sizes[l3] = len(l3_set)
        die = _int(t / "die_id")
        pus[cpu] = PU(cpu, core=core, l3=l3, die=None if die is None else (package or 0) * 1000 + die,
                      package=package, numa=numa.get(cpu), cluster=cluster)
    for cpu, pu in pus.items():  # a cluster that is one core, or the whole L3, says nothing of its own
        if pu.cluster is not None:
            size = cluster_sizes[pu.cluster]
            cores_in = len({p.core for p in pus.values() if p.cluster == pu.cluster})
            if cores_in < 2 or (pu.l3 is not None and size >= l3_sizes.get(pu.l3, 0)):
                pus[cpu] = replace(pu, cluster=None)
    for node in sorted(set(numa.values())):
        sockets = {pus[c].package for c in pus if numa.get(c) == node and pus[c].package is not None}
        node_socket[node] = min(sockets) if sockets else -1
    return Topology(pus, source=f"sysfs {sys_root}", numa_sockets=node_socket)


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _cpu_list(path: Path) -> list[int]:
    text = path.read_text().strip()
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ValueError(f"{path}: bad CPU list {text!r} (expected e.g. 0-3,8)") from None
    return out


def _first_list(*paths: Path) -> list[int]:
    for path in paths:
        if path.is_file():
            return _cpu_list(path)
    return []


def _l3_cpus(cache: Path) -> list[int]:
    for index in sorted(cache.glob("index[0-9]*")):
        if _int(index / "level") == 3 and (index / "shared_cpu_list").is_file():
            return _cpu_list(index / "shared_cpu_list")
    return []
