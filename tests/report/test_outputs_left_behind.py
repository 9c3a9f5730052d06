"""What a command leaves behind: report's CSV cells never run as spreadsheet formulas (OWASP's CSV-injection
rule), `report` and `run --monitor` on a full file system leave no file (a real tmpfs filled to its last
pages, as root), and an empty monitor file a killed run left is no reason for the next run to fail."""

from __future__ import annotations

import contextlib
import csv
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from store_tools import write_iterations_csv
from tailscope.cli import main
from tailscope.verbs.workflow import csv_text_cell

FORMULAS = ["+cmd|' /C calc'!A0", "@SUM(1)", "=1+1", "-2+3"]  # (the importer strips TAB and CR around names)
FAST = ["--chunk-bytes", "256k", "--sums", "40", "--sums-per-iteration", "4", "--cpus", "0", "--no-progress"]


def _import(root: Path, nodes: list[str], unit: str = "GB/s") -> Path:
    rng = np.random.default_rng(3)
    path = write_iterations_csv(
        root / "it.csv", nodes, 6, 3, lambda *_: f"{100 * (1 + rng.normal(0, 0.01)):.4f}", unit
    )
    argv = ["--campaign", str(root / "c"), "--name", "=cmd", "--higher-is-better"]
    assert main(["import", "iterations", str(path), *argv]) == 0
    return root / "c"


def test_text_cells_that_start_a_formula_are_written_as_text(tmp_path, capsys):
    campaign = _import(tmp_path, [f"n{i}" for i in range(3)] + FORMULAS, unit="@unit")
    assert main(["report", str(campaign), "-o", str(tmp_path / "r.html")]) in (0, 1, 3)
    for name in ("r-runs.csv", "r-nodes.csv"):
        with open(tmp_path / name, newline="") as fh:
            rows = list(csv.DictReader(fh))
        nodes = {r["node"] for r in rows}
        assert nodes == {f"n{i}" for i in range(3)} | {f"'{f}" for f in FORMULAS}, name
        for row in rows:
            for key, value in row.items():
                assert not value or value[0] not in "=+@\t\r", (name, key, value)
                assert not value.startswith("-2"), (name, key, value)
    with open(tmp_path / "r-runs.csv", newline="") as fh:
        runs = list(csv.DictReader(fh))
    assert {r["unit"] for r in runs} == {"'@unit"} and {r["probe"] for r in runs} == {"imported:=cmd"}
    assert all(float(r["value"]) > 0 and float(r["perf_ratio"]) > 0 for r in runs)  # numbers stay numbers


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("-0.5", "'-0.5"),
        ("a-b", "a-b"),
        ("", ""),
        (None, None),
        ("\r=x", "'\r=x"),
        ("\tx", "'\tx"),
        ("-", "-"),
        ("@", "@"),
    ],
)
def test_csv_text_cell(value, cell):
    assert csv_text_cell(value) == cell


@contextlib.contextmanager
def _small_fs(where: Path) -> Iterator[Path]:
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(fs: Path, leave_kib: int) -> None:
    """Fill the file system but `leave_kib` KiB."""
    filler = fs / "filler"
    with contextlib.suppress(FileNotFoundError):
        filler.unlink()
    free = os.statvfs(fs).f_bavail * os.statvfs(fs).f_frsize
    with contextlib.suppress(OSError):
        filler.write_bytes(b"\0" * max(0, free - leave_kib * 1024))


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.root
def test_report_on_a_full_disk_leaves_no_csv(tmp_path, capsys):
    campaign = _import(tmp_path, [f"n{i}" for i in range(4)])
    with _small_fs(tmp_path / "fs") as fs:
        for leave in (0, 8, 64, 256):  # nothing, one CSV, both CSVs but not the report
            _fill(fs, leave)
            before = _files(fs)
            assert main(["report", str(campaign), "-o", str(fs / "r.html")]) == 2
            assert "No space left on device" in capsys.readouterr().err
            assert _files(fs) == before, leave  # no CSV, no temp file


@pytest.mark.root
def test_run_monitor_on_a_full_disk_leaves_no_monitor_file(tmp_path, capsys):
    with _small_fs(tmp_path / "fs") as fs:
        campaign = fs / "c"
        assert main(["run", "l2sum", "--trials", "1", "--campaign", str(campaign), *FAST]) == 0
        for leave in (4, 8, 16):  # tsmon cannot write its header, or its first sample
            _fill(fs, leave)
            before = _files(fs)
            code = main(["run", "l2sum", "--trials", "1", "--monitor", "--campaign", str(campaign), *FAST])
            assert code == 2, capsys.readouterr()
            assert _files(fs) == before, leave
            assert not (campaign / "monitor").exists()


def test_an_empty_monitor_file_of_a_killed_run_is_dropped(tmp_path, capsys):
    """tsmon killed before its header (0 bytes): `run` stored such files of dead runs and failed on them."""
    campaign = tmp_path / "c"
    assert main(["run", "l2sum", "--trials", "1", "--campaign", str(campaign), *FAST]) == 0
    from tailscope.node.facts import node_name
    from tailscope.store.campaign import safe_name

    left = campaign / "monitor" / f"{safe_name(node_name())}.0123456789ab.tsmon.jsonl"
    left.parent.mkdir()
    left.write_bytes(b"")
    left.with_name(left.name + ".stderr").write_bytes(b"")
    assert main(["run", "l2sum", "--trials", "1", "--monitor", "--campaign", str(campaign), *FAST]) == 0
    assert not left.exists() and not left.with_name(left.name + ".stderr").exists()
