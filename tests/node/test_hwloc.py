"""hwloc topology groups: the synthetic 2-socket fixture (real lstopo output), this machine's lstopo, and
the c2c summary per shared level with what could not be measured."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tailscope.node.hwloc import HwlocError, parse_xml, read_topology, summarise_c2c

FIXTURE = Path(__file__).parent / "fixtures" / "hwloc-2s-2die-2l3-smt.xml"


def test_groups_of_the_synthetic_two_socket_machine():
    topo = read_topology(FIXTURE)
    assert sorted(topo.pus) == list(range(32))
    # package:2 die:2 l3cache:2 core:2 pu:2 -> PUs 0-1 one core, 0-3 one L3, 0-7 one die, 0-15 one package
    assert topo.shared(0, 1) == "core"
    assert topo.shared(0, 2) == "l3"
    assert topo.shared(0, 4) == "die"
    assert topo.shared(0, 8) == "package"
    assert topo.shared(0, 16) == "machine"
    assert topo.pus[17].numa == 1 and topo.pus[3].numa == 0
    assert topo.numa_distances == {(0, 0): 10, (0, 1): 32, (1, 0): 32, (1, 1): 10}


def test_c2c_summary_per_level():
    topo = read_topology(FIXTURE)
    pairs = [(0, 1, 8.0), (0, 2, 20.0), (1, 3, 22.0), (0, 4, 60.0), (0, 16, 140.0), (2, 18, 150.0)]
    summary = summarise_c2c(pairs, topo)
    assert summary.groups == {
        "core": (8.0, 1),
        "l3": (21.0, 2),
        "die": (60.0, 1),
        "machine": (145.0, 2),
    }
    assert len(summary.not_measured) == 1 and summary.not_measured[0].startswith("package")
    assert "none was measured" in summary.not_measured[0]
    assert summary.lines()[1] == "c2c l3           21.0 ns median over 2 pair(s): one L3 (core complex)"


def test_bad_input_is_named():
    with pytest.raises(HwlocError, match="not XML"):
        parse_xml("<topology", source="x.xml")
    with pytest.raises(HwlocError, match=r"x.xml: expected hwloc 2.x XML"):
        parse_xml("<topo/>", source="x.xml")
    with pytest.raises(HwlocError, match="CPU 99 is not in the topology"):
        summarise_c2c([(0, 99, 1.0)], read_topology(FIXTURE))


@pytest.mark.skipif(shutil.which("lstopo-no-graphics") is None, reason="hwloc not installed")
def test_this_machine_and_its_c2c(probe_c2c_pairs):
    topo = read_topology()
    assert set(probe_c2c_pairs.cpus) <= set(topo.pus)
    summary = summarise_c2c(probe_c2c_pairs.pairs, topo)
    assert sum(n for _, n in summary.groups.values()) == len(probe_c2c_pairs.pairs)
    for median, _ in summary.groups.values():
        assert 5 < median < 5000
    # every level either has a median or says why not
    assert len(summary.groups) + len(summary.not_measured) == 5


def test_kunpeng_clusters_group_c2c_from_sysfs_alone():
    """Issue 27 (seed 003: intra-CCL, inter-CCL, inter-die) and issue 26 (no hwloc: topology from sysfs): a
    recorded-format Kunpeng 920 sysfs tree, 48 cores in two dies of 4-core clusters."""
    from pathlib import Path

    from tailscope.node.topology import read_sysfs

    topo = read_sysfs(Path(__file__).parents[1] / "counters" / "fixtures" / "sysfs-kp920")
    assert (topo.shared(0, 3), topo.shared(0, 4), topo.shared(23, 24)) == ("cluster", "l3", "package")
    summary = summarise_c2c([(0, 1, 40.0), (0, 2, 42.0), (0, 5, 80.0), (4, 9, 85.0), (0, 30, 150.0)], topo)
    assert summary.groups == {"cluster": (41.0, 2), "l3": (82.5, 2), "package": (150.0, 1)}
    assert summary.lines()[0].startswith("c2c cluster      41.0 ns median over 2 pair(s): one cluster")


def test_without_hwloc_the_topology_comes_from_sysfs(monkeypatch):
    import shutil

    from tailscope.node import hwloc

    monkeypatch.setattr(shutil, "which", lambda name: None)  # no lstopo on PATH: a no-root install
    topo = hwloc.read_topology()
    assert topo.source == "sysfs /sys" and topo.pus
    assert all(pu.package is not None for pu in topo.pus.values())
