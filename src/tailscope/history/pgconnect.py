"""One connection to the site's PostgreSQL history (psycopg 3), for the history's tables and the jobs' alike,
without pandas (a Slurm epilog inserts through it): an unreachable server, refused credentials or a failed
statement is one StoreError line naming the password-less URL and what the server said."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tailscope.history.location import redact
from tailscope.store.errors import StoreError

CONNECT_TIMEOUT_S = 10


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


@contextmanager
def connect(
    url: str, *, connect_timeout_s: int = CONNECT_TIMEOUT_S, statement_timeout_ms: int | None = None
) -> Iterator[Any]:
    """A connection, committed when the block ends (rolled back on an error); closed either way."""
    location = redact(url)
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            f"{location}: PostgreSQL needs psycopg 3: pip install 'tailscope[postgresql]'"
        ) from None
    options = f"-c statement_timeout={statement_timeout_ms}" if statement_timeout_ms else ""
    try:
        con = psycopg.connect(url, connect_timeout=connect_timeout_s, options=options)
    except psycopg.Error as exc:
        raise StoreError(f"{location}: cannot connect: {redact(first_line(exc))}") from None
    try:
        with con:
            yield con
    except psycopg.Error as exc:
        raise StoreError(f"{location}: {redact(first_line(exc))}") from None
    finally:
        con.close()


class Database:
    """A PostgreSQL history as one process uses it: its tables created or migrated on the first connection
    (`_migrate`, under the history's advisory lock), then plain connections."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = redact(url)
        self._ready = False

    def _migrate(self, con: Any) -> None:
        raise NotImplementedError

    @contextmanager
    def _connect(self) -> Iterator[Any]:
        with connect(self.url) as con:
            if not self._ready:
                self._migrate(con)
                self._ready = True
            yield con
