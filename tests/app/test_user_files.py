"""userfile.py, the one bounded reader of a path a user or a user's program named (issue 30, items 5, 6, 13,
15): regular files only, size-limited, never out of the trial's directory through a link."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tailscope import userfile
from tailscope.userfile import UnreadableFile, read_bytes, read_lines


@pytest.fixture(params=["openat2", "per-component"])
def resolve(request, monkeypatch):
    """Both ways of staying inside a directory: openat2 RESOLVE_BENEATH, and O_NOFOLLOW per component (the
    path of kernels before 5.6 or a filter that refuses openat2)."""
    monkeypatch.setattr(userfile, "_openat2_missing", request.param == "per-component")
    return request.param


def test_a_fifo_is_refused_at_once(tmp_path, resolve):
    os.mkfifo(tmp_path / "md.log")
    start = time.monotonic()
    with pytest.raises(UnreadableFile, match=r"md\.log: a FIFO, not a regular file"):
        list(read_lines("md.log", limit=1 << 20, piece=1 << 20, beneath=tmp_path))
    assert time.monotonic() - start < 5  # open(O_NONBLOCK): no writer is waited for


def test_devices_are_refused_whoever_names_them(tmp_path, resolve):
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnreadableFile):  # a link out of the directory, or (openat2 off) a link at all
        list(read_lines("zero", limit=1 << 20, piece=1 << 20, beneath=tmp_path))
    with pytest.raises(UnreadableFile, match=r"/dev/zero: a character device, not a regular file"):
        read_bytes("/dev/zero", limit=1 << 20)  # a definition named on the command line: links followed


def test_a_link_out_of_the_directory_is_never_followed(tmp_path, resolve):
    """`--metric-file` linked to /etc/shadow by the program: refused, its text never read."""
    secret = tmp_path / "secret"
    secret.write_text("root:$6$salt$hash:19000::::::\n")
    work = tmp_path / "trial"
    (work / "sub").mkdir(parents=True)
    for name, target in (("abs.log", secret), ("rel.log", "../secret"), ("sub/up.log", "../../secret")):
        (work / name).symlink_to(target)
        with pytest.raises(UnreadableFile) as exc:
            list(read_lines(name, limit=1 << 20, piece=1 << 20, beneath=work))
        assert "root:" not in str(exc.value)
    for name in ("../secret", "sub/../../secret", str(secret)):
        with pytest.raises(UnreadableFile):
            read_bytes(name, limit=1 << 20, beneath=work)


def test_a_regular_file_inside_is_read_and_a_link_inside_only_with_openat2(tmp_path, resolve):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "md.log").write_bytes(b"a\r\nbb\n" + b"c" * 10)
    got = list(read_lines("sub/md.log", limit=100, piece=4, beneath=tmp_path))
    assert got == [b"a", b"bb", b"cccc", b"cccc", b"cc"]
    (tmp_path / "link.log").symlink_to("sub/md.log")
    if resolve == "openat2":
        assert read_bytes("link.log", limit=100, beneath=tmp_path).startswith(b"a\r\n")
    else:
        with pytest.raises(UnreadableFile, match="a symbolic link"):
            read_bytes("link.log", limit=100, beneath=tmp_path)


def test_size_limits_hold_even_for_a_growing_file(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x\n" * 1000)
    with pytest.raises(UnreadableFile, match="more than the 1000 bytes"):
        read_bytes(big, limit=1000)
    grow = tmp_path / "grow"
    grow.write_bytes(b"")
    stop = threading.Event()

    def writer() -> None:
        with grow.open("ab") as f:
            while not stop.is_set():
                f.write(b"y" * 4096 + b"\n")
                f.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.05)
        got = sum(len(line) + 1 for line in read_lines(grow, limit=64 * 1024, piece=1 << 20))
    except UnreadableFile:
        got = 0  # larger than the limit already when it was opened: refused, also bounded
    finally:
        stop.set()
        thread.join()
    assert got <= 64 * 1024 + 4097


@pytest.mark.parametrize("size", [10, 64, 65, 200])
def test_a_tail_read_starts_on_a_line_and_reads_no_more_than_its_limit(tmp_path, size):
    """tail=True (a job's output: its figures are at its end): a larger file is not refused, its last `limit`
    bytes are read from the first line that starts in them."""
    path = tmp_path / "out.txt"
    lines = [f"line {i:03d}".encode() for i in range(size)]  # 8 bytes and a newline each
    path.write_bytes(b"\n".join(lines) + b"\n")
    limit = 64 * 9  # 64 whole lines
    got = list(read_lines(path, limit=limit, piece=1 << 20, tail=True))
    assert got == lines[-64:]
    got = list(read_lines(path, limit=limit - 4, piece=1 << 20, tail=True))  # its first line cut: dropped
    assert got == lines[-63:]
    if size > 64:
        with pytest.raises(UnreadableFile, match="more than the"):
            list(read_lines(path, limit=limit, piece=1 << 20))  # without tail: refused
    else:  # a file within the limit: the same lines either way
        assert list(read_lines(path, limit=limit, piece=1 << 20)) == lines[-64:]
