"""Fixtures of the native probe tests; the helpers they use live in probe_runs.py (imported by name, so the
module does not clash with the other test directories' conftest modules)."""

from probe_runs import hugepages, no_hugepages, probe

__all__ = ["hugepages", "no_hugepages", "probe"]
