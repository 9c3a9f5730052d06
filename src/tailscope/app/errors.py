"""The application package's input error (exit 2), in a module of its own so every app module can raise it."""

from __future__ import annotations

from tailscope.errors import InputError


class AppInputError(InputError):
    """An application command line or definition that cannot be used (exit 2)."""
