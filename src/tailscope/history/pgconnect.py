"""One connection to the site's PostgreSQL history (psycopg 3), for the history's tables and the jobs' alike,
without pandas (a Slurm epilog inserts through it): an unreachable server, refused credentials or a failed
statement is one StoreError line naming the password-less URL and what the server said; a URL libpq cannot
read, or reads with a password spilled into its host, port or database, is refused before connecting."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tailscope.history.location import ambiguous, read, redact, scrub
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
    params, why = read(url)
    if params is None:
        raise StoreError(
            f"{location}: not a URL libpq can read ({why}); percent-encode special characters of the user "
            "name and password (%40 for @, %2F for /, %3F for ?, %25 for %)"
        )
    if ambiguous(params):
        raise StoreError(
            f"{location}: libpq reads a host, port or database name out of this URL that only an unencoded "
            "'/', '@' or '?' in the password gives; percent-encode them (%2F, %40, %3F)"
        )
    options = f"-c statement_timeout={statement_timeout_ms}" if statement_timeout_ms else ""
    try:
        con = psycopg.connect(url, connect_timeout=connect_timeout_s, options=options)
    except psycopg.Error as exc:
        raise StoreError(f"{location}: cannot connect: {scrub(first_line(exc), url)}") from None
    try:
        with con:
            yield con
    except psycopg.Error as exc:
        raise StoreError(f"{location}: {scrub(first_line(exc), url)}") from None
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
