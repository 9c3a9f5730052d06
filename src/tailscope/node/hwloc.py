"""Topology groups from hwloc: which core complex (L3), die, package and NUMA node each CPU belongs to.

hwloc knows more than the sysfs files the probes read (dies, L3 groups on every vendor, NUMA distances), so
the groups that summarise core-to-core latency come from it. hwloc is read, never linked: `lstopo-no-graphics
--of xml` (hwloc 2.x, Debian `hwloc-nox`/`hwloc`) is parsed here. The XML nests objects
(Machine > Package > [NUMANode] > Die > L3Cache > L2Cache > L1Cache > Core > PU); a PU's groups are its
ancestors. NUMA distances, when the firmware gives them, are a `distances2` element (type NUMANode,
indexing os, `u64values` row-major). The result is the one Topology model (node/topology.py).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tailscope.node.topology import PU, Topology, read_sysfs

# What two CPUs share, innermost first: the label of a pair is the first level at which both agree.
LEVELS = ("core", "cluster", "l3", "die", "package", "machine")
LEVEL_WORDS = {
    "core": "hardware threads of one core",
    "cluster": "one cluster (Arm CCL), different core",
    "l3": "one L3 (core complex)",
    "die": "one die, different L3",
    "package": "one socket, different die",
    "machine": "different sockets",
}


class HwlocError(ValueError):
    """hwloc output that cannot be read, or no hwloc; the message names the source and what to do."""


def _walk(elem: ET.Element, ancestors: dict[str, int], topo: Topology, numa_of: dict[int, int]) -> None:
    kind = elem.get("type", "")
    here = dict(ancestors)
    if kind in ("Package", "Die", "Core"):
        here[kind] = int(elem.get("os_index", elem.get("gp_index", "-1")))
    elif kind == "Group" and elem.get("subtype") == "Cluster":  # hwloc >= 2.5: Linux's cluster_cpus
        here["Cluster"] = int(elem.get("gp_index", "-1"))
    elif kind == "L3Cache":
        here[kind] = int(elem.get("gp_index", "-1"))
    elif kind == "PU":
        os_index = int(elem.get("os_index", "-1"))
        topo.pus[os_index] = PU(
            os_index=os_index,
            core=here.get("Core", os_index),
            l3=here.get("L3Cache"),
            die=here.get("Die"),
            package=here.get("Package"),
            numa=numa_of.get(os_index),
            cluster=here.get("Cluster"),
        )
    for child in elem.findall("object"):
        _walk(child, here, topo, numa_of)


def _cpuset(text: str | None) -> set[int]:
    """hwloc's cpuset: 32-bit hex words separated by commas, most significant first, each possibly
    shortened (`0x00008000,0x0` is CPU 47; `0x00000003` is CPUs 0 and 1)."""
    if not text:
        return set()
    value = 0
    for word in text.split(","):
        value = value << 32 | int(word, 16)
    return {i for i in range(value.bit_length()) if value >> i & 1}


def parse_xml(text: str, *, source: str = "hwloc XML") -> Topology:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise HwlocError(f"{source}: not XML ({exc})") from None
    if root.tag != "topology" or not root.get("version", "").startswith("2"):
        raise HwlocError(f'{source}: expected hwloc 2.x XML (<topology version="2.0">), got <{root.tag}>')
    numa_of: dict[int, int] = {}
    for node in root.iter("object"):
        if node.get("type") == "NUMANode":
            for cpu in _cpuset(node.get("cpuset")):
                numa_of[cpu] = int(node.get("os_index", "-1"))
    topo = Topology(source=source)
    for top in root.findall("object"):
        _walk(top, {}, topo, numa_of)
    if not topo.pus:
        raise HwlocError(f"{source}: no PU objects (is this an hwloc topology?)")
    for dist in root.iter("distances2"):
        if dist.get("type") != "NUMANode":
            continue
        indexes = [int(v) for v in (dist.findtext("indexes") or "").split()]
        values = [int(v) for v in " ".join(e.text or "" for e in dist.findall("u64values")).split()]
        n = len(indexes)
        if len(values) != n * n:
            raise HwlocError(f"{source}: distances2 has {len(values)} values for {n} NUMA nodes")
        for i, a in enumerate(indexes):
            for j, b in enumerate(indexes):
                topo.numa_distances[(a, b)] = values[i * n + j]
    return topo


def read_topology(xml_path: Path | None = None) -> Topology:
    """This machine's topology (`lstopo-no-graphics --of xml`, else sysfs), or the hwloc XML file given."""
    if xml_path is not None:
        try:
            return parse_xml(xml_path.read_text(), source=str(xml_path))
        except OSError as exc:
            raise HwlocError(f"{xml_path}: {exc.strerror}") from None
    for tool in ("lstopo-no-graphics", "hwloc-ls", "lstopo"):
        exe = shutil.which(tool)
        if exe:
            proc = subprocess.run(
                [exe, "--of", "xml"], capture_output=True, text=True, timeout=60, check=False
            )
            if proc.returncode != 0:
                raise HwlocError(f"{tool} --of xml: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
            return parse_xml(proc.stdout, source=f"{tool} --of xml")
    try:  # no hwloc (a no-root install): what sysfs says, which knows cores, clusters, L3s, dies and sockets
        return read_sysfs()
    except (OSError, ValueError) as exc:
        raise HwlocError(f"no hwloc (lstopo-no-graphics) and no topology in sysfs: {exc}") from None


@dataclass(frozen=True)
class C2cSummary:
    """Median one-way latency (ns) of the measured pairs, per level the two CPUs share."""

    groups: dict[str, tuple[float, int]]  # level -> (median ns, pairs)
    not_measured: tuple[str, ...]  # levels this topology has but no pair covered, with why

    def lines(self) -> list[str]:
        out = [
            f"c2c {level:8s} {median:8.1f} ns median over {n} pair(s): {LEVEL_WORDS[level]}"
            for level, (median, n) in self.groups.items()
        ]
        return out + [f"c2c not measured: {why}" for why in self.not_measured]


def summarise_c2c(pairs: Iterable[tuple[int, int, float]], topo: Topology) -> C2cSummary:
    """Group (cpu a, cpu b, one-way ns) by what a and b share in `topo`; say which levels have no pair."""
    by_level: dict[str, list[float]] = {}
    for a, b, ns in pairs:
        if a not in topo.pus or b not in topo.pus:
            raise HwlocError(f"{topo.source}: CPU {a if a not in topo.pus else b} is not in the topology")
        by_level.setdefault(topo.shared(a, b), []).append(ns)
    groups = {lv: (statistics.median(by_level[lv]), len(by_level[lv])) for lv in LEVELS if lv in by_level}
    present = _levels_present(topo)
    missing = []
    has_clusters = any(pu.cluster is not None for pu in topo.pus.values())
    for level in LEVELS:
        if level in groups or (level == "cluster" and not has_clusters):  # only the levels the machine has
            continue
        if level in present:
            missing.append(f"{level} ({LEVEL_WORDS[level]}): the topology has such pairs, none was measured")
        else:
            missing.append(
                f"{level} ({LEVEL_WORDS[level]}): no two CPUs here share only that ({_why(level, topo)})"
            )
    return C2cSummary(groups, tuple(missing))


def _levels_present(topo: Topology) -> set[str]:
    cpus: Sequence[int] = sorted(topo.pus)
    return {topo.shared(a, b) for i, a in enumerate(cpus) for b in cpus[i + 1 :]}


def _why(level: str, topo: Topology) -> str:
    n = len(topo.pus)
    if level == "core":
        return f"{n} CPUs, one hardware thread per core"
    if level == "cluster":
        return "no cluster of cores below the L3 (Arm CCL) here"
    if level == "l3":
        return "no L3 shared by two cores"
    if level == "die":
        return "no die with more than one L3"
    if level == "package":
        return "no socket with more than one die"
    return "one socket"
