"""One connection to the site's PostgreSQL history (psycopg 3), for the history's tables and the jobs' alike,
without pandas (a Slurm epilog inserts through it): an unreachable server, refused credentials or a failed
statement is one StoreError line naming the password-less URL and what the server said; a URL libpq cannot
read, or reads with a password spilled into its host, port or database, is refused before connecting."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tailscope.history.location import ambiguous, read, redact, scrub
from tailscope.store.errors import StoreError

CONNECT_TIMEOUT_S = 10
LOCK_KEY = 0x7461696C7363  # "tailsc": the advisory lock that serialises creation and migration


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


def migrate(
    con: Any,
    location: str,
    *,
    what: str,
    key: str,
    version: int,
    migrations: Mapping[int, Sequence[str]],
    columns: Mapping[str, str],
) -> None:
    """Create or migrate one part's tables (the history's, the jobs'), once per database: under the advisory
    lock, the migrations after the version stored in `tailscope_history_meta` under `key` (each statement
    formatted with `columns`), then `version` stored; a stored version newer than this tailscope's is one
    StoreError line."""
    with con.transaction(), con.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
        cur.execute("CREATE TABLE IF NOT EXISTS tailscope_history_meta (key text PRIMARY KEY, value text)")
        cur.execute("SELECT value FROM tailscope_history_meta WHERE key = %s", (key,))
        row = cur.fetchone()
        stored = int(row[0]) if row else 0
        if stored > version:
            raise StoreError(
                f"{location}: {what} schema version {stored} is newer than this tailscope's ({version}); "
                "upgrade tailscope"
            )
        for step in range(stored + 1, version + 1):
            for statement in migrations[step]:
                cur.execute(statement.format(**columns))
        cur.execute(
            "INSERT INTO tailscope_history_meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
            "EXCLUDED.value",
            (key, str(version)),
        )


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
