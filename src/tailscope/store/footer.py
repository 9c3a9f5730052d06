"""The footer hash of a shard: Parquet checks its pages (CRC per page, written by store/load.py) but nothing
checks its footer (the schema, column names, types, offsets of every column chunk). A bit flip there read
as a column silently NULL, a renamed column, or an exception from deep inside the reader. So the writer
keeps a hash of each shard's footer in the commit record that makes the shard visible, and every read path
checks it when it opens the shard (read.py: the fast scan, the careful path, samples_by_node, the shards a
read leaves out).

The hash covers the footer and the 8 bytes after it (the footer's length and the magic `PAR1`): BLAKE2b,
16 bytes, hex. Checking it costs one fstat and one read of the file's end (a shard of one node's trials has
a footer of a few KiB). The fast scan reads a shard of at most TAIL_READ bytes whole in that read and hands
the bytes to the Parquet reader (`checked_source`), which then opens nothing: reading the runs of 1,000
nodes (1,000 shards of ~8 KiB) took 0.99x the CPU time of the read without the check, against 1.03-1.08x
for a separate read of the end (medians of 10-14 alternated reads on a busy 2-vCPU guest).
Commit records written before the hash existed have none: their shards are read as before.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

TAIL_READ = 64 << 10  # bytes read from a shard's end at once: the whole footer of every shard we write
TRAILER = 8  # footer length (4 bytes, little-endian) and b"PAR1"


class FooterDamage(Exception):
    """Why a shard's end is not the footer its commit recorded."""


def _footer_bytes(path: Path | str) -> bytes:
    """The footer and its trailer, read from the end of the file; FooterDamage when there is no footer."""
    tail, _ = _read_end(path)
    return _footer_of(tail)


def _footer_of(tail: bytes) -> bytes:
    return tail[-(int.from_bytes(tail[-8:-4], "little") + TRAILER) :]


def _read_end(path: Path | str) -> tuple[bytes, bool]:
    """The file's end, at least its footer and trailer, and whether that is the whole file (a shard of
    TAIL_READ bytes or less is read whole in the one read); FooterDamage when there is no footer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise FooterDamage("missing (named by a commit record but not on disk)") from exc
    except OSError as exc:
        raise FooterDamage(f"not readable ({exc.strerror})") from exc
    try:
        size = os.fstat(fd).st_size
        if size < 12:
            raise FooterDamage("not a readable Parquet shard (truncated: shorter than any Parquet file)")
        tail = os.pread(fd, min(size, TAIL_READ), max(0, size - TAIL_READ))
        if tail[-4:] != b"PAR1" or int.from_bytes(tail[-8:-4], "little") + 12 > size:
            raise FooterDamage("not a readable Parquet shard (truncated: no Parquet footer at its end)")
        length = int.from_bytes(tail[-8:-4], "little") + TRAILER
        if length > len(tail):
            tail = os.pread(fd, length, size - length)
        if len(tail) != max(length, min(size, TAIL_READ)):
            raise FooterDamage("not a readable Parquet shard (truncated while it was read)")
        return tail, len(tail) == size
    except OSError as exc:
        raise FooterDamage(f"not readable ({exc.strerror})") from exc
    finally:
        os.close(fd)


def footer_digest(path: Path | str) -> str:
    """The hash a commit record keeps for the shard at `path` (read from the file as written)."""
    return hashlib.blake2b(_footer_bytes(path), digest_size=16).hexdigest()


def checked_source(path: str, expected: str | None) -> tuple[str | bytes, str | None]:
    """What to open the shard from, and why it is damaged (as `footer_damage`, None when it is not): a
    small shard's bytes, read whole with its footer (one read, no second open by the Parquet reader: the
    footer check then costs nothing on a fleet of small shards), else its path."""
    try:
        tail, whole = _read_end(path)
    except FooterDamage as exc:
        return path, str(exc)
    return (tail if whole else path), _mismatch(_footer_of(tail), expected)


def _mismatch(footer: bytes, expected: str | None) -> str | None:
    if expected is not None and hashlib.blake2b(footer, digest_size=16).hexdigest() != expected:
        return (
            "its Parquet footer (schema, column names and offsets) is not the one its commit recorded "
            "(a changed byte: bit rot, or a rewrite)"
        )
    return None


def footer_damage(path: Path | str, expected: str | None) -> str | None:
    """Why the shard's end is not a Parquet footer, or not the one its commit recorded (`expected`: None for
    shards committed before footer hashes, checked for a footer only); None when it is."""
    try:
        footer = _footer_bytes(path)
    except FooterDamage as exc:
        return str(exc)
    return _mismatch(footer, expected)
