"""What tailscope writes whole (a report, a .prom file, a manifest) replaces a regular file or makes a new
one, and never replaces anything else at that path (found on issue 30's acceptance pass).

The writes are atomic: a temp file beside the target, renamed onto it. Renamed onto a device, that replaced
the device itself: `tailscope jobs show H --prometheus /dev/full` as root left a regular file holding the
metrics where /dev/full was, for every process on the node (`-o /dev/null` the same, and /dev/stdout, a
symbolic link, was replaced by a file). A device, FIFO, socket, directory or symbolic link at the path is
now refused with one line naming it, and nothing is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.store.campaign import atomic_files
from tailscope.store.files import write_atomic_bytes


def _others(tmp_path: Path) -> dict[str, Path]:
    """A FIFO, a symbolic link to a file, and a directory, each where a file would be written."""
    fifo, link, target, directory = (tmp_path / n for n in ("fifo", "link", "target.txt", "dir"))
    os.mkfifo(fifo)
    target.write_text("kept\n")
    link.symlink_to(target)
    directory.mkdir()
    return {"FIFO": fifo, "symbolic link": link, "directory": directory}


def _kind(path: Path) -> int:
    return stat.S_IFMT(path.lstat().st_mode)


@pytest.mark.parametrize("writer", ["write_atomic_bytes", "atomic_files"])
def test_only_a_regular_file_is_replaced(tmp_path, writer):
    def write(path: Path, data: bytes) -> None:
        if writer == "write_atomic_bytes":
            write_atomic_bytes(path, data)
        else:
            with atomic_files() as put:
                put(tmp_path / "first.html", b"first")  # all or none: refused with the second
                put(path, data)

    for what, path in _others(tmp_path).items():
        kind = _kind(path)
        with pytest.raises(OSError) as caught:
            write(path, b"metrics\n")
        assert caught.value.filename == str(path) and f"a {what}, not a regular file" in str(caught.value)
        assert _kind(path) == kind  # still what it was
        assert not (tmp_path / "first.html").exists()
    assert (tmp_path / "target.txt").read_text() == "kept\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    regular = tmp_path / "out.prom"
    for data in (b"one\n", b"two\n"):  # a new file, then that file replaced
        write(regular, data)
        assert regular.read_bytes() == data


def _campaign(tmp_path: Path) -> Path:
    csv = tmp_path / "it.csv"
    rows = [f"n{n},{r},{i},{100 + r + i},GB/s,true" for n in (1, 2) for r in range(3) for i in range(3)]
    csv.write_text("node,run,iteration,value,unit,higher_is_better\n" + "\n".join(rows) + "\n")
    campaign = tmp_path / "c"
    assert main(["import", "iterations", str(csv), "--campaign", str(campaign)]) == 0
    return campaign


def test_report_and_prometheus_outputs_refuse_a_fifo_in_one_line(tmp_path, capsys):
    campaign = _campaign(tmp_path)
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    capsys.readouterr()
    said = (f"tailscope: error: {fifo}: a FIFO, not a regular file: tailscope writes its output as a file of "
            "its own in its place and never replaces another kind (give a file name)\n")  # fmt: skip
    for argv in (["report", str(campaign), "-o", str(fifo)],
                 ["verdict", str(campaign), "--prometheus", str(fifo)]):  # fmt: skip
        assert main(argv) == 2, argv
        assert capsys.readouterr().err == said
        assert _kind(fifo) == stat.S_IFIFO


@pytest.mark.root
def test_a_device_given_as_output_stays_a_device(tmp_path, capsys):
    """As root: `--prometheus /dev/null` (here a null device made in tmp_path) left a regular file there."""
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here: {exc.strerror}")
    campaign = _campaign(tmp_path)
    capsys.readouterr()
    for argv in (["verdict", str(campaign), "--prometheus", str(device)],
                 ["report", str(campaign), "-o", str(device)]):  # fmt: skip
        assert main(argv) == 2, argv
        assert "a character device, not a regular file" in capsys.readouterr().err
        assert _kind(device) == stat.S_IFCHR
