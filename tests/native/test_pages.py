"""Page policies (4k, thp, 2m, 1g), pages records from /proc/self/pagemap, and their error paths."""

from __future__ import annotations

import ctypes
import os
import stat
from pathlib import Path

import pytest

from tailscope.native import native_path

MIB = 1024 * 1024
GIB = 1024 * MIB
PR_SET_THP_DISABLE = 41  # <linux/prctl.h>: no transparent huge pages for this process and its children


def pages_by_array(run) -> dict[str, list[tuple[int, int, int]]]:
    """array -> [(thread, va, pa)] in va order, one entry per page."""
    out: dict[str, list[tuple[int, int, int]]] = {}
    for rec in run.of("pages"):
        for i, pa in enumerate(rec["pa"]):
            out.setdefault(rec["array"], []).append((rec["thread"], rec["va"] + i * rec["page_size"], pa))
    for pages in out.values():
        pages.sort(key=lambda p: p[1])
    return out


def check_layout(run, page_size: int, pages_per_array: int) -> dict[str, list[tuple[int, int, int]]]:
    """Each page listed once, consecutive, threads in order, all present with frames (root)."""
    arrays = pages_by_array(run)
    assert all(rec["page_size"] == page_size for rec in run.of("pages"))
    for name, pages in arrays.items():
        vas = [va for _, va, _ in pages]
        assert len(pages) == pages_per_array, name
        assert vas == list(range(vas[0], vas[0] + page_size * len(vas), page_size)), name
        assert vas[0] % page_size == 0
        threads = [t for t, _, _ in pages]
        assert threads == sorted(threads) and threads[0] == 0
        assert all(pa != 0 for _, _, pa in pages), f"{name}: page not present after first touch"
    return arrays


@pytest.mark.root
def test_4k_pages_records(probe):
    # 2 MiB per array = 512 pages of 4 KiB each
    run = probe("stream", "--elements", str(2 * MIB // 8), "--reps", "2", "--page", "4k")
    assert run.config["page_policy"] == "4k" and run.config["page_size"] == 4096
    arrays = check_layout(run, 4096, 512)
    assert sorted(arrays) == ["a", "b", "c"]
    assert not run.warnings("thp_partial") and not run.warnings("pagemap_unreadable")
    assert all(pa % 4096 == 0 for _, _, pa in arrays["a"])
    # thread t's pages are those holding the first data byte of its chunk onwards
    chunks = run.params["chunk_elements_per_thread"]
    if len(chunks) > 1:
        first_of_t1 = min(va for t, va, _ in arrays["a"] if t == 1)
        assert (first_of_t1 - arrays["a"][0][1]) == -(-chunks[0] * 8 // 4096) * 4096


@pytest.mark.root
def test_offset_shifts_the_data_within_pages(probe):
    # 64 bytes into the allocation, 8192 bytes of data: 3 pages of 4 KiB hold it
    run = probe(
        "l2sum", "--cpus", "0", "--chunk-bytes", "8192", "--sums", "10", "--page", "4k", "--offset", "64"
    )
    assert run.config["offset"] == 64
    check_layout(run, 4096, 3)


@pytest.mark.root
def test_thp_pages_are_2m_aligned_when_backed(probe):
    run = probe("l2sum", "--sums", "20")
    arrays = check_layout(run, 2 * MIB, -(-run.params["data_bytes"] // (2 * MIB)))
    aligned = all(pa % (2 * MIB) == 0 for _, _, pa in arrays["data"])
    # a 4 KiB-backed region has no reason to start on a 2 MiB frame boundary; a huge page always does
    assert aligned == (not run.warnings("thp_partial"))


def _disable_thp() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_THP_DISABLE)")


def test_thp_partial_warning(probe):
    run = probe("l2sum", "--sums", "20", "--no-pages", preexec=_disable_thp)
    (message,) = run.warnings("thp_partial")
    two_m = 2 << 20  # the thp array is the threads' chunks back to back, rounded up to whole 2 MiB regions
    n = -(-run.config["params"]["data_bytes"] // two_m)
    kb = n * 2048
    assert message.startswith(f"array data: only 0 of {n} 2 MiB regions are backed by huge pages")
    assert f"(AnonHugePages 0 kB of {kb} kB;" in message
    assert run.of("validation")[0]["passed"] is True  # a warning, not a failure


def _become_nobody() -> None:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


@pytest.mark.root
def test_pagemap_without_privilege(probe):
    exe = native_path("l2sum")
    for parent in [exe, *exe.parents]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            pytest.skip(f"{parent} is not accessible to other users")
    run = probe("l2sum", "--sums", "20", preexec=_become_nobody)
    assert not run.of("pages")
    (message,) = run.warnings("pagemap_unreadable")
    assert "no frame numbers" in message and "CAP_SYS_ADMIN" in message


@pytest.mark.root
def test_hugetlb_2m(probe, hugepages):
    hugepages(64, 0)
    run = probe("l2sum", "--sums", "20", "--page", "2m")
    assert run.config["page_policy"] == "2m" and run.config["page_size"] == 2 * MIB
    arrays = check_layout(run, 2 * MIB, -(-run.params["data_bytes"] // (2 * MIB)))
    assert all(pa % (2 * MIB) == 0 for _, _, pa in arrays["data"])
    stream = probe("stream", "--elements", str(6 * MIB // 8), "--reps", "2", "--page", "2m")
    check_layout(stream, 2 * MIB, 3)


@pytest.mark.root
def test_hugetlb_1g_with_offset(probe, hugepages):
    hugepages(0, 1)
    run = probe("l2sum", "--sums", "20", "--page", "1g", "--offset", "512m")
    assert run.config["page_size"] == GIB and run.config["offset"] == 512 * MIB
    (page,) = pages_by_array(run)["data"]
    assert page[0] == 0 and page[1] % GIB == 0 and page[2] % GIB == 0 and page[2] != 0


@pytest.mark.parametrize(
    ("page", "knob"),
    [
        ("2m", "echo 1 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        ("1g", "`default_hugepagesz=1G hugepagesz=1G hugepages=1`"),
    ],
)
@pytest.mark.parametrize("check_args", [False, True])
def test_hugetlb_not_reserved(probe, no_hugepages, page, knob, check_args):
    if page == "1g" and not Path("/sys/kernel/mm/hugepages/hugepages-1048576kB").exists():
        pytest.skip("this kernel has no 1 GiB huge pages")
    # one thread, 1 MiB of data: one huge page of either size
    args = ("--cpus", "0", "--chunk-bytes", "1m", "--sums", "20", "--page", page) + (
        ("--check-args",) if check_args else ()
    )
    run = probe("l2sum", *args, expect=3)
    assert [r["record"] for r in run.records] == ["config"]  # the config, then the error
    assert run.stderr.startswith(f"l2sum: error: --page {page}: needs ")
    assert knob in run.stderr
    if page == "1g":
        assert "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages" in run.stderr
