"""A history's location as messages show it: a directory, or a `postgresql://` URL without its password."""

from __future__ import annotations

import re


def redact(location: str) -> str:
    """The location (or any text naming it) without a password."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", str(location))


def is_url(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))
