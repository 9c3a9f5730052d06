"""What the importers' fast CSV readers share (pyarrow's reader in large batches, checked vectorised).

A fast reader handles only what it checks; anything else raises FastReaderFallback, and the importer
discards what it wrote and runs its line reader, which names the file and line of the problem.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

FAST_BLOCK = 1 << 20  # bytes per batch of the fast readers


class FastReaderFallback(Exception):
    """The fast reader met something it does not check itself; the line reader (naming file:line) runs."""


def record_batches(reader: Any) -> Iterator[Any]:
    """The non-empty batches of a pyarrow CSV stream reader; a batch it cannot read is a fallback."""
    import pyarrow as pa

    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowInvalid, UnicodeDecodeError):
            raise FastReaderFallback from None
        if batch.num_rows:
            yield batch
