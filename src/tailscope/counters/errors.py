"""Error classes of the counters package, in a module light enough for the CLI to import at start-up."""

from __future__ import annotations


class MetricsInputError(ValueError):
    """No samples, or an interval that does not exist; the message says what was asked and what is stored."""
