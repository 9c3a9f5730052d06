"""The footer hash of a shard: Parquet checks its pages (CRC per page, written by store/load.py) but nothing
checks its footer (the schema, column names, types, offsets of every column chunk). A bit flip there read
as a column silently NULL, a renamed column, or an exception from deep inside the reader. So the writer
keeps a hash of each shard's footer in the commit record that makes the shard visible, and every read path
checks it when it opens the shard (read.py: the fast scan, the careful path, samples_by_node, the shards a
read leaves out).

The hash covers the footer and the 8 bytes after it (the footer's length and the magic `PAR1`): BLAKE2b,
16 bytes, hex. Reading it costs one fstat and one read of the file's end (a shard of one node's trials has a
footer of a few KiB), about 10 us against the ~0.4 ms of opening the shard for its columns.
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
        return tail[-length:]
    except OSError as exc:
        raise FooterDamage(f"not readable ({exc.strerror})") from exc
    finally:
        os.close(fd)


def footer_digest(path: Path | str) -> str:
    """The hash a commit record keeps for the shard at `path` (read from the file as written)."""
    return hashlib.blake2b(_footer_bytes(path), digest_size=16).hexdigest()


def footer_damage(path: Path | str, expected: str | None) -> str | None:
    """Why the shard's end is not a Parquet footer, or not the one its commit recorded (`expected`: None for
    shards committed before footer hashes, checked for a footer only); None when it is."""
    try:
        footer = _footer_bytes(path)
    except FooterDamage as exc:
        return str(exc)
    if expected is not None and hashlib.blake2b(footer, digest_size=16).hexdigest() != expected:
        return (
            "its Parquet footer (schema, column names and offsets) is not the one its commit recorded "
            "(a changed byte: bit rot, or a rewrite)"
        )
    return None
