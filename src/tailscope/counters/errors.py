"""Error classes of the counters package, in a module light enough for the CLI to import at start-up."""

from __future__ import annotations

from tailscope.errors import InputError


class MetricsInputError(InputError, ValueError):
    """No samples, or an interval that does not exist; the message says what was asked and what is stored."""
