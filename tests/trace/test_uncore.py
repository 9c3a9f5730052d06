"""Uncore link traffic per region: replayed from a recorded 2-socket SKX uncore.tsv (wrap-around at 48 bits,
multiplexing), and the live C path against the SKX sysfs fixture, which resolves uncore_upi_* per unit and
socket and, with no such PMU here, leaves them out with one reason each. Untested on hardware."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
from trace_tools import FIXTURES, REPO

from tailscope.trace.records import read_tool_output
from tailscope.trace.uncore import deltas, link_traffic

FLIT = 64 / 9


def test_replayed_upi_counts_become_bytes_between_sockets():
    uncore = pd.read_csv(FIXTURES / "uncore-skx-2s.tsv", sep="\t")
    d = deltas(uncore).set_index(["socket", "unit"])["count"]
    assert d.loc[(0, 0)] == 0
    assert d.loc[(0, 1)] == 900  # wrapped once at 2^48
    assert d.loc[(1, 0)] == 9000
    assert d.loc[(1, 1)] == 1800  # 900 counted while running half the enabled time
    t = link_traffic(uncore, [0, 1], tsc_hz=2e9)
    into_1 = t[t["dst_socket"] == 1]
    assert set(into_1["src_socket"]) == {0}
    assert into_1["bytes"].sum() == pytest.approx((9000 + 1800) * FLIT)
    assert t[t["dst_socket"] == 0]["bytes"].sum() == pytest.approx(900 * FLIT)
    assert set(t["link"]) == {"uncore_upi_0", "uncore_upi_1"}
    assert t["seconds"].iloc[0] == pytest.approx(1e-3)
    assert set(t["source"]) == {"uncore"}


def test_four_sockets_leave_the_link_peer_unknown():
    uncore = pd.read_csv(FIXTURES / "uncore-skx-2s.tsv", sep="\t")
    t = link_traffic(uncore, [0, 1, 2, 3], tsc_hz=2e9)
    assert set(t["src_socket"]) == {-1}


def test_live_tool_resolves_uncore_units_and_skips_them_here(jacobi, tool_library, tmp_path):
    _, binary = jacobi
    out = tmp_path / "ompt"
    env = {
        "PATH": "/usr/bin:/bin",
        "OMP_NUM_THREADS": "2",
        "OMP_TOOL_LIBRARIES": str(tool_library),
        "TAILSCOPE_OMPT_OUT": str(out),
        "TAILSCOPE_OMPT_SYSFS": str(REPO / "tests/counters/fixtures/sysfs-skx-2s"),
        "TAILSCOPE_OMPT_UNCORE": "upi_rx:uncore_upi/event=0x3/",
    }
    if "gcc" in str(binary.parent.name):
        link = tmp_path / "gomp"
        link.mkdir()
        from tailscope.trace.runtime import find_libomp

        (link / "libgomp.so.1").symlink_to(find_libomp())
        env["LD_LIBRARY_PATH"] = str(link)
    subprocess.run([str(binary), "64", "1", "naive"], env=env, check=True, capture_output=True)
    tool = read_tool_output(out)
    upi = [s for s in tool.skipped if "uncore_upi_" in s]
    assert {s.split(" on ")[1].split(" ")[0] for s in upi} == {"uncore_upi_0", "uncore_upi_1", "uncore_upi_2"}
    assert any("socket 1" in s for s in upi)  # one opening per socket, on the unit's cpumask CPU
    assert tool.meta["uncore"] == ""  # nothing counted
    assert not Path(out / "uncore.tsv").exists()
    assert int(tool.meta["parallel_regions"]) == 1  # the program was still traced
