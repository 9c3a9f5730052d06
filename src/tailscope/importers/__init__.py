"""Importers: one module per foreign format, each producing rows of the store's tables (store/schema.py).

Analysis never learns where data came from. Every importer parses and checks its whole input before it writes
anything, and raises `ImportInputError` naming file:line and what was expected.
"""

from __future__ import annotations

from tailscope.errors import InputError


class ImportInputError(InputError, ValueError):
    """Input an importer cannot take; the message names the file, the line and what was expected."""
