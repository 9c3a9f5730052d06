"""Importers: one module per foreign format, each producing rows of the store's tables (store/schema.py).

Analysis never learns where data came from. Every importer reads its input as a stream (never the whole file
in memory), stages bounded Arrow chunks through the store's one load path (`store.load.load_into`: all or
nothing, trial numbers claimed under the campaign lock, a file's content imported once), and raises
`ImportInputError` naming file:line and what was expected; an import that fails leaves nothing in the
campaign.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from tailscope.errors import InputError

if TYPE_CHECKING:
    from tailscope.store.load import Transaction

BOM = "\ufeff"


class ImportInputError(InputError, ValueError):
    """Input an importer cannot take; the message names the file, the line and what was expected."""


class TextLines:
    """The lines of one open UTF-8 file: (line number, text), a leading BOM removed; bad bytes name their
    line. `sha256` covers the bytes read so far (the whole file once the lines are exhausted)."""

    def __init__(self, path: Path, handle: BinaryIO) -> None:
        self.path, self.handle = path, handle
        self.sha256 = hashlib.sha256()

    def __iter__(self) -> Iterator[tuple[int, str]]:
        number = 0
        try:
            for number, raw in enumerate(self.handle, start=1):
                self.sha256.update(raw)
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ImportInputError(f"{self.path}:{number}: not UTF-8 text ({exc.reason})") from None
                if number == 1 and text.startswith(BOM):
                    text = text[1:]
                yield number, text
        except OSError as exc:
            raise ImportInputError(f"{self.path}:{number + 1}: cannot read ({exc.strerror or exc})") from None


@contextlib.contextmanager
def open_text(path: Path) -> Iterator[TextLines]:
    """Open `path` for an importer; an unopenable file is an ImportInputError naming it."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    with handle:
        yield TextLines(Path(path), handle)


def stored_count(load: Transaction, question: str, *args: str) -> int:
    """One count the store's read path answers (`runs_of_variant`, `samples_of`) over what the campaign
    already holds; 0 for a campaign this load creates. `samples_of` reads with pyarrow alone (no DuckDB)."""
    if not load.exists:
        return 0
    from tailscope.store import read

    if question == "samples_of":
        return read.samples_of(load.campaign(), *args)
    con = read.connect(load.campaign())
    try:
        return int(getattr(con, question)(*args))
    finally:
        con.close()


def stored_samples_by_node(load: Transaction, source: str) -> dict[str, int]:
    """node -> sample values of `source` the campaign already holds (read once, with pyarrow alone); empty
    for a campaign this load creates."""
    if not load.exists:
        return {}
    from tailscope.store import read

    return read.samples_by_node(load.campaign(), source)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return digest.hexdigest()


def digest_in_background(path: Path) -> Callable[[], str]:
    """`file_digest(path)` computed in a thread while the caller reads the file (hashlib releases the GIL:
    a 6 MB file's 3.5 ms overlap the scan on a second core); the returned function waits for it and returns
    it, or raises its ImportInputError."""
    import threading

    result: list[str] = []
    failed: list[ImportInputError] = []

    def run() -> None:
        try:
            result.append(file_digest(path))
        except ImportInputError as exc:
            failed.append(exc)

    worker = threading.Thread(target=run, name="tailscope-digest", daemon=True)
    worker.start()

    def wait() -> str:
        worker.join()
        if failed:
            raise failed[0]
        return result[0]

    return wait
