"""Placement from recorded numa_maps and fake topologies: the placement matrix, the local-first traffic model
and the finding, for a 2-socket node (naive and first-touch-parallel Jacobi), seed 004's 4-socket case, and a
1-node machine."""

from __future__ import annotations

import pandas as pd
import pytest
from trace_tools import FIXTURES

from tailscope.trace import placement
from tailscope.trace.placement import Snapshot, local_first, model_traffic, parse_numa_maps
from tailscope.trace.summary import matrix
from tailscope.trace.topology import read_topology

PAGE = 4096
GRID = 262144 * PAGE  # the 1 GiB anonymous mapping of the fixtures


def snapshot(name: str) -> Snapshot:
    per_node, counted = parse_numa_maps((FIXTURES / name).read_text(), name)
    return Snapshot(0, 1, 10_000, per_node, counted)


def team(sockets_of_threads: list[int]) -> pd.DataFrame:
    """One parallel region (id 1) whose implicit task i ran on socket sockets_of_threads[i]."""
    rows = [
        {
            "thread": 0,
            "kind": "parallel",
            "parallel": 1,
            "socket": sockets_of_threads[0],
            "tsc_begin": 0,
            "tsc_end": 9_000,
            "seconds": 1.0,
            "thread_num": None,
        }
    ]
    rows += [
        {
            "thread": i,
            "kind": "implicit_task",
            "parallel": 1,
            "socket": s,
            "tsc_begin": 10,
            "tsc_end": 8_000,
            "seconds": 0.9,
            "thread_num": i,
        }
        for i, s in enumerate(sockets_of_threads)
    ]
    return pd.DataFrame(rows)


def test_numa_maps_counts_program_data_only():
    per_node, counted = parse_numa_maps((FIXTURES / "numa_maps-2s-naive.txt").read_text(), "naive")
    # heap 36 + anon 4 + grid + stack 9 on node 0, one anon mapping of 3 pages on node 1; files and the tool's
    # `local` buffers are left out
    assert per_node == {0: (36 + 4 + 262144 + 9) * PAGE, 1: 3 * PAGE}
    assert counted == 5


def test_numa_maps_bad_line_names_file_and_line():
    with pytest.raises(placement.TraceInputError, match=r"maps.txt:2: expected an address"):
        parse_numa_maps("7f00 default anon=1 N0=1\nnot-an-address default\n", "maps.txt")


def test_two_sockets_naive_is_half_remote_and_found(sysfs_2s):
    topo = read_topology(sysfs_2s)
    traffic = model_traffic(team([0, 1]), [snapshot("numa_maps-2s-naive.txt")], topo)
    m = matrix(traffic)
    total = traffic["bytes"].sum()
    # socket 1's thread takes its half: 3 pages from its own node, the rest from socket 0
    assert m.loc[0, 1] == pytest.approx(total / 2 - 3 * PAGE, rel=1e-9)
    assert m.loc[1, 1] == pytest.approx(3 * PAGE)
    assert m.loc[0, 0] == pytest.approx(total / 2, rel=1e-9)
    f = placement.finding(traffic, topo)
    assert f.kind == "imbalanced"
    assert f.remote_fraction == pytest.approx(0.5, abs=1e-4)
    assert "socket 0 holds 100%" in f.text and "numactl --interleave" in f.text


def test_two_sockets_parallel_first_touch_is_local(sysfs_2s):
    topo = read_topology(sysfs_2s)
    traffic = model_traffic(team([0, 1]), [snapshot("numa_maps-2s-parallel.txt")], topo)
    remote = traffic.loc[traffic["src_socket"] != traffic["dst_socket"], "bytes"].sum()
    assert remote / traffic["bytes"].sum() < 0.001  # only the heap and stack pages stay on node 0
    assert placement.finding(traffic, topo).kind == "balanced"


def test_four_sockets_seed_matrix(sysfs_4s):
    """Seed 004: one thread per socket, all data on socket 1: a quarter goes from socket 1 to each other."""
    topo = read_topology(sysfs_4s)
    traffic = model_traffic(team([0, 1, 2, 3]), [snapshot("numa_maps-4s-naive.txt")], topo)
    m = matrix(traffic)
    total = traffic["bytes"].sum()
    assert list(m.index) == [1]
    for dst in (0, 1, 2, 3):
        assert m.loc[1, dst] == pytest.approx(total / 4)
    f = placement.finding(traffic, topo)
    assert f.kind == "imbalanced" and f.remote_fraction == pytest.approx(0.75)
    assert "socket 1 holds 100%" in f.text


def test_one_node_says_all_local(tmp_path):
    from trace_tools import make_sysfs

    topo = read_topology(make_sysfs(tmp_path / "one", 1, 2))
    traffic = model_traffic(team([0, 0]), [snapshot("numa_maps-2s-naive.txt")], topo)
    f = placement.finding(traffic, topo)
    assert f.kind == "single-node" and "every memory access is local" in f.text


@pytest.mark.parametrize(
    ("share", "data", "expected"),
    [
        ({0: 5.0, 1: 5.0}, {0: 10.0}, {(0, 0): 5.0, (0, 1): 5.0}),
        ({0: 5.0, 1: 5.0}, {0: 5.0, 1: 5.0}, {(0, 0): 5.0, (1, 1): 5.0}),
        ({0: 6.0, 1: 2.0, 2: 2.0}, {1: 5.0, 2: 5.0}, {(1, 1): 2.0, (2, 2): 2.0, (1, 0): 3.0, (2, 0): 3.0}),
    ],
)
def test_local_first_flows(share, data, expected):
    flows = local_first(share, data)
    assert flows == pytest.approx(expected)
    assert sum(flows.values()) == pytest.approx(sum(data.values()))
