"""Fixtures of the application tests (helpers: app_tools.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_tools import daemonize_argv


@pytest.fixture
def daemonize(tmp_path: Path) -> list[str]:
    """python3 daemonize.py SLEEP: forks a setsid daemon (pid in $DAEMON_PID), then sleeps."""
    return daemonize_argv(tmp_path)
