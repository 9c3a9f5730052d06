"""Fixtures of the counter tests (helpers live in counter_tools.py, imported by name)."""

from counter_tools import skx_sysfs

__all__ = ["skx_sysfs"]
