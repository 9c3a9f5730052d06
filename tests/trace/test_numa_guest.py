"""Live placement on a real 2-node NUMA machine: a qemu guest (software emulation) runs the gcc-built jacobi
on LLVM's libomp under the OMPT tool, naive and with parallel first touch; the host analyses the files it
sends back with the guest's own topology. Slow (two boots of ~10-60 s each under TCG on 2 shared vCPUs)."""

from __future__ import annotations

import pytest
from numa_guest import available, boot, build_initramfs, collect, dump_dir

from tailscope.trace import placement
from tailscope.trace.records import pair_regions, read_tool_output
from tailscope.trace.runtime import find_libomp
from tailscope.trace.topology import read_topology

pytestmark = pytest.mark.slow

SYSFS = [
    "/sys/devices/system/node/node0/cpulist",
    "/sys/devices/system/node/node1/cpulist",
    "/sys/devices/system/cpu/cpu0/topology/physical_package_id",
    "/sys/devices/system/cpu/cpu1/topology/physical_package_id",
]


@pytest.fixture(scope="module")
def guest_runs(tmp_path_factory, request):
    missing = available()
    if missing:
        pytest.skip(missing)
    import shutil
    import subprocess

    from trace_tools import JACOBI

    from tailscope.native import native_library

    work = tmp_path_factory.mktemp("numa-guest")
    jacobi = work / "jacobi"
    subprocess.run(
        [shutil.which("gcc") or "gcc", "-O2", "-g", "-fopenmp", "-o", str(jacobi), str(JACOBI)], check=True
    )
    tool = native_library("tailscope_ompt")
    script = ""
    for mode in ("naive", "parallel"):
        script += (
            f"LD_LIBRARY_PATH=/gomp OMP_NUM_THREADS=2 OMP_PLACES='{{0}},{{1}}' OMP_PROC_BIND=close "
            f"OMP_TOOL_LIBRARIES={tool} TAILSCOPE_OMPT_OUT=/out/{mode} {jacobi} 1024 3 {mode}\n"
        )
        script += dump_dir(f"/out/{mode}", mode)
    script += dump_dir(" ".join(SYSFS), "sysfs")
    image = build_initramfs(work, [jacobi], tool, find_libomp(), script)
    console = boot(image, timeout=900)
    tags = collect(console, work / "files")
    if set(tags) != {"naive", "parallel", "sysfs"}:
        pytest.fail(f"the guest sent back {sorted(tags)}; console tail:\n{console[-2000:]}")
    topo = read_topology(tags["sysfs"] / "sys")
    out = {}
    for mode in ("naive", "parallel"):
        tool_out = read_tool_output(tags[mode] / "out" / mode)
        regions = pair_regions(tool_out, topo).regions
        snaps = placement.read_snapshots(tool_out.directory, tool_out.numa)
        traffic = placement.model_traffic(regions, snaps, topo)
        out[mode] = (regions, snaps, traffic, placement.finding(traffic, topo))
    return topo, out


def test_guest_has_two_nodes_and_threads_where_bound(guest_runs):
    topo, out = guest_runs
    assert topo.nodes == [0, 1] and topo.sockets == [0, 1]
    for regions, _, _, _ in out.values():
        tasks = regions[regions["kind"] == "implicit_task"]
        assert (tasks["cpu_begin"] == tasks["thread_num"]).all()
        assert set(tasks["socket"]) == {0, 1}


def test_naive_initialisation_puts_the_grid_on_one_node(guest_runs):
    _, out = guest_runs
    _, snaps, traffic, finding = out["naive"]
    grid = max(snaps, key=lambda s: sum(s.bytes_per_node.values()))
    top = max(grid.bytes_per_node.values()) / sum(grid.bytes_per_node.values())
    assert top > 0.95
    assert finding.kind == "imbalanced"
    assert finding.remote_fraction == pytest.approx(0.5, abs=0.03)
    holder = max(grid.bytes_per_node, key=grid.bytes_per_node.get)  # the node the initial thread ran on
    remote = traffic[traffic["src_socket"] != traffic["dst_socket"]]
    assert set(remote["src_socket"]) == {holder} and set(remote["dst_socket"]) == {1 - holder}


def test_parallel_first_touch_spreads_the_grid(guest_runs):
    _, out = guest_runs
    _, snaps, traffic, finding = out["parallel"]
    grid = max(snaps, key=lambda s: sum(s.bytes_per_node.values()))
    total = sum(grid.bytes_per_node.values())
    assert all(0.4 < b / total < 0.6 for b in grid.bytes_per_node.values())
    assert finding.kind == "balanced"
    assert finding.remote_fraction < 0.05
    remote = traffic[traffic["src_socket"] != traffic["dst_socket"]]["bytes"].sum()
    assert remote < 0.05 * traffic["bytes"].sum()
