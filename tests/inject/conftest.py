"""Fixtures of the injector and journal tests (helpers: journal_tools.py, victims.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A process for an injector to act on (cpu-quota) or a forged entry to name: `sleep 300`."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()
