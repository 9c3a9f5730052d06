"""A history's location as messages show it: a directory, or a `postgresql://` URL without its password.

The URL is read by libpq's own parser (`psycopg.conninfo.conninfo_to_dict`, the one that connects), so what
is removed is exactly what libpq takes as the password: `user:PW@`, `?password=PW` (and `sslpassword`),
with or without a user name. A URL whose parts libpq reads so that a password could have spilled into
another part (an unencoded `/`, `@` or `?` in it makes a host `w@h`, a port `p` or a database `x@h/db`), a
URL libpq cannot read (a bad `%`-escape: its error echoes the raw token), and any URL where psycopg is not
installed are shown as the scheme and the user part before any `:`, `@`, `/` or `?`, then `...`.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

SCHEMES = ("postgresql://", "postgres://")
SECRETS = frozenset({"password", "sslpassword"})
_SHOWN_IN_URL = frozenset({"user", "host", "port", "dbname"})


def is_url(location: str) -> bool:
    return location.startswith(SCHEMES)


def parse(location: str) -> dict[str, str] | None:
    """libpq's reading of the URL (keyword -> value), or None where it cannot read it or psycopg is
    missing."""
    return read(location)[0]


def read(location: str) -> tuple[dict[str, str] | None, str]:
    """(libpq's reading of the URL or None, why not): the reason is libpq's message with every quoted part
    left out (it quotes the part it could not read, which may be the password)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        return None, "psycopg is not installed"
    try:
        return {str(k): str(v) for k, v in conninfo_to_dict(location).items() if v is not None}, ""
    except Exception as exc:  # psycopg.ProgrammingError
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        pieces = (lines[0] if lines else type(exc).__name__).split('"')
        return None, '"'.join(p if i % 2 == 0 else "..." for i, p in enumerate(pieces))


def ambiguous(params: Mapping[str, str]) -> bool:
    """Parts libpq read in a way only an unencoded `/`, `@` or `?` of a password produces: an `@` in a host or
    database name, a port that is not a number."""
    hosts, ports = params.get("host", ""), params.get("port", "")
    bad_port = any(p and not p.isdigit() for p in ports.split(","))
    return "@" in hosts or "@" in params.get("dbname", "") or bad_port


def _scheme_and_user(location: str) -> str:
    scheme = next(s for s in SCHEMES if location.startswith(s))
    rest = location[len(scheme) :]
    cut = min((i for i in (rest.find(c) for c in ":@/?") if i >= 0), default=len(rest))
    return f"{scheme}{rest[:cut]}..."


def redact(location: str) -> str:
    """The location as messages show it: a directory as given, a URL without any password."""
    text = str(location)
    if not is_url(text):
        return text
    params = parse(text)
    if params is None or ambiguous(params):
        return _scheme_and_user(text)
    return url_without_secrets(next(s for s in SCHEMES if text.startswith(s)), params)


def url_without_secrets(scheme: str, params: Mapping[str, str]) -> str:
    """`scheme` USER@HOST:PORT/DBNAME?other=... from libpq's keywords, every secret left out."""
    user = quote(params["user"], safe="") + "@" if params.get("user") else ""
    hosts = params.get("host", "").split(",")
    ports = params.get("port", "").split(",")
    socket_dir = any(h.startswith("/") for h in hosts)
    netloc = ""
    if not socket_dir:
        parts = []
        for i, host in enumerate(hosts):
            port = ports[i] if i < len(ports) else (ports[0] if len(ports) == 1 else "")
            shown = f"[{host}]" if ":" in host else quote(host, safe=".-_")
            parts.append(f"{shown}:{port}" if port else shown)
        netloc = ",".join(p for p in parts if p)
    query = [
        (k, v)
        for k, v in params.items()
        if k not in SECRETS and (k not in _SHOWN_IN_URL or (socket_dir and k in ("host", "port")))
    ]
    path = "/" + quote(params["dbname"], safe="") if params.get("dbname") else ""
    tail = "?" + "&".join(f"{k}={quote(v, safe='/:,')}" for k, v in query) if query else ""
    return f"{scheme}{user}{netloc}{path}{tail}"


def scrub(text: str, location: str) -> str:
    """`text` (an error message) with the raw location, where it appears, replaced by its redacted form."""
    text = str(text)
    return text.replace(location, redact(location)) if location and is_url(location) else text
