"""The one error class of `tailscope trace`: a program or input the tracer cannot take (exit 2)."""

from __future__ import annotations

from tailscope.errors import InputError


class TraceInputError(InputError, ValueError):
    """One line naming the program, file or option and what was expected."""
