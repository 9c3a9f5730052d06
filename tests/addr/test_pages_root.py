"""The physical pages a probe records are real: checked against /proc/<pid>/pagemap of the running probe,
read here independently, and through a campaign's `pages` table; without privilege they are reported
unreadable and nothing is stored. As root on this VM (guest-physical frames; see the report's VM statement).

/proc/<pid>/pagemap (Documentation/admin-guide/mm/pagemap.rst): one 64-bit entry per 4 KiB virtual page,
bit 63 present, bits 0-54 the page frame number (zero without CAP_SYS_ADMIN).
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

from tailscope.native import native_path

PAGE = 4096
HUGE = 2 << 20
PRESENT = 1 << 63
PFN_MASK = (1 << 55) - 1
NOBODY = 65534


def anonymous_mappings(pid: int) -> list[tuple[int, int]]:
    """(start, end) of the process's anonymous read-write mappings of at least 2 MiB."""
    out = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[1].startswith("rw"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if end - start >= HUGE:
                out.append((start, end))
    return out


def pagemap_snapshot(pid: int) -> dict[int, int]:
    """Virtual 4 KiB page -> physical address of every present page of those mappings."""
    frames: dict[int, int] = {}
    with open(f"/proc/{pid}/pagemap", "rb") as fh:
        for start, end in anonymous_mappings(pid):
            fh.seek(start // PAGE * 8)
            data = fh.read((end - start) // PAGE * 8)
            for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
                if entry & PRESENT and entry & PFN_MASK:
                    frames[start + i * PAGE] = (entry & PFN_MASK) * PAGE
    return frames


def system_ram() -> list[tuple[int, int]]:
    """The 'System RAM' ranges of /proc/iomem (real addresses as root)."""
    ranges = []
    for line in Path("/proc/iomem").read_text().splitlines():
        if line.strip().endswith(": System RAM"):
            lo, hi = (int(x, 16) for x in line.split(":")[0].strip().split("-"))
            ranges.append((lo, hi))
    return ranges


def run_and_watch(argv: list[str], out_dir: Path) -> tuple[str, dict[int, int]]:
    """Run a probe, snapshot its pagemap while it sums (memory is not touched anew then), return its
    stdout and the last snapshot taken while it was still alive. Output goes to files: a pipe nobody
    reads would stall the probe."""
    with open(out_dir / "stdout", "w") as out, open(out_dir / "stderr", "w") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        last: dict[int, int] = {}
        try:
            deadline = time.monotonic() + 120
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    snap = pagemap_snapshot(proc.pid)
                except (FileNotFoundError, ProcessLookupError):
                    break
                if proc.poll() is None and len(snap) >= len(last):
                    last = snap
                time.sleep(0.05)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, (out_dir / "stderr").read_text()
    return (out_dir / "stdout").read_text(), last


@pytest.mark.root
@pytest.mark.parametrize("page", ["thp", "4k"])
def test_recorded_pages_are_those_of_the_running_probes_pagemap(page, tmp_path):
    from tailscope.probes.parse import parse_probe_output

    # 2 threads x 3 MiB, well beyond L2: ~2 s of summing while this test reads the probe's pagemap
    argv = [str(native_path("l2sum")), "--chunk-bytes", "3m", "--sums", "15000", "--page", page]
    stdout, snapshot = run_and_watch(argv, tmp_path)
    out = parse_probe_output(stdout, name="l2sum")
    assert snapshot, "no pagemap snapshot was taken while the probe ran"
    assert not [w for w in out.warnings if w.get("code") == "pagemap_unreadable"]
    recorded = [
        (rec["va"] + i * rec["page_size"], pa, rec["page_size"])
        for rec in out.pages
        for i, pa in enumerate(rec["pa"])
    ]
    assert recorded and all(pa != 0 for _, pa, _ in recorded)
    size = recorded[0][2]
    assert size == (HUGE if page == "thp" else PAGE)
    # the probe's frame of every page is the one the kernel shows for that virtual page while it runs
    for va, pa, _ in recorded:
        assert snapshot.get(va - va % PAGE) == pa, hex(va)
    # distinct frames for distinct virtual pages, all of them RAM
    assert len({va for va, _, _ in recorded}) == len({pa for _, pa, _ in recorded}) == len(recorded)
    ram = system_ram()
    if ram and any(hi for _, hi in ram):  # /proc/iomem shows zeros to the unprivileged
        assert all(any(lo <= pa <= hi for lo, hi in ram) for _, pa, _ in recorded)
    thp_partial = [w for w in out.warnings if w.get("code") == "thp_partial"]
    if page == "thp" and not thp_partial:
        # a huge page: 2 MiB-aligned frame, its 512 small pages physically contiguous (read independently)
        for va, pa, _ in recorded:
            assert pa % HUGE == 0 and va % HUGE == 0
            assert [snapshot.get(va + k * PAGE) for k in range(512)] == [pa + k * PAGE for k in range(512)]
    if page == "4k":
        assert all(pa % PAGE == 0 for _, pa, _ in recorded)


@pytest.mark.root
def test_a_campaigns_pages_table_holds_real_frames(tmp_path):
    from tailscope.cli import main
    from tailscope.store.campaign import Campaign
    from tailscope.store.views import connect

    campaign = tmp_path / "c"

    code = main(
        ["run", "l2sum", "--trials", "2", "--chunk-bytes", "3m", "--sums", "20", "--campaign", str(campaign)]
    )
    assert code == 0
    con = connect(Campaign.open(campaign))
    try:
        pages = con.execute(
            "SELECT run_id, virtual_address, physical_address, page_size FROM pages "
            "ORDER BY run_id, virtual_address"
        ).df()
    finally:
        con.close()
    assert len(pages) and pages["physical_address"].notna().all() and (pages["physical_address"] > 0).all()
    assert set(pages["page_size"]) == {HUGE}
    for _, run in pages.groupby("run_id"):
        assert run["physical_address"].is_unique and run["virtual_address"].is_unique
    ram = system_ram()
    if ram and any(hi for _, hi in ram):
        assert all(any(lo <= int(pa) <= hi for lo, hi in ram) for pa in pages["physical_address"])


def _become_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@pytest.mark.root
def test_without_privilege_pages_are_reported_unreadable_and_not_stored(tmp_path, monkeypatch, capsys):
    """The probe run as nobody (the campaign written by this process): a pagemap_unreadable warning, no
    pages rows, and `addr map --campaign` says why there is nothing to map."""
    exe = native_path("l2sum")
    for parent in [exe, *exe.parents]:
        if not parent.stat().st_mode & stat.S_IXOTH:
            pytest.skip(f"{parent} is not accessible to other users")
    from tailscope.campaign import runner
    from tailscope.probes.parse import parse_probe_output
    from tailscope.store.campaign import Campaign
    from tailscope.store.views import connect

    out = parse_probe_output(
        subprocess.run(
            [str(exe), "--sums", "20"], capture_output=True, text=True, check=True, preexec_fn=_become_nobody
        ).stdout
    )
    assert not out.pages
    (warning,) = [w for w in out.warnings if w.get("code") == "pagemap_unreadable"]
    assert "CAP_SYS_ADMIN" in warning["message"]

    real_popen = subprocess.Popen

    def popen_as_nobody(*args, **kwargs):
        return real_popen(*args, preexec_fn=_become_nobody, **kwargs)

    monkeypatch.setattr(runner.subprocess, "Popen", popen_as_nobody)
    from tailscope.cli import main

    campaign = tmp_path / "c"
    assert main(["run", "l2sum", "--trials", "1", "--sums", "20", "--campaign", str(campaign)]) == 0
    con = connect(Campaign.open(campaign))
    try:
        assert con.execute("SELECT count(*) FROM runs WHERE status = 'ok'").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM pages").fetchone()[0] == 0
    finally:
        con.close()
    monkeypatch.undo()
    capsys.readouterr()
    assert main(["addr", "map", "--model", "SKX_24", "--campaign", str(campaign)]) == 2
    assert "no physical pages were recorded" in capsys.readouterr().err
