"""A command in its own network namespace with only loopback up: MPI programs find no interface to bind but
`lo` (hpcc binds every interface it sees). Needs root."""

from __future__ import annotations

import os
import shutil

import pytest

# argv prefix: `[*LOOPBACK_ONLY, program, *args]` runs `program args` inside the namespace
LOOPBACK_ONLY = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def require_loopback_namespace() -> None:
    """Skip the test where no such namespace can be made here."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("a network namespace needs root, unshare and ip")
