"""Helpers of the counter tests: the native tools (tsevents, tsmon, l2sum) and the SKX sysfs fixture (a module
with its own name, not conftest, so it does not clash with the other test directories' helpers)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tailscope.native import NativeMissingError, native_path

FIXTURES = Path(__file__).with_name("fixtures")
SKX_SYSFS = FIXTURES / "sysfs-skx-2s"
SHARED_DATA = Path("/work/shared/data/mccalpin-event-tables")


def tool(name: str) -> Path:
    try:
        return native_path(name)
    except NativeMissingError as exc:  # not built: the counter tests cannot run without the native tools
        pytest.skip(str(exc))


def tsevents(*args: str, sysfs: Path | None = SKX_SYSFS, env: dict[str, str] | None = None) -> list[dict]:
    """Run tsevents and return its JSON records; raises CalledProcessError on a nonzero exit."""
    argv = [str(tool("tsevents"))]
    if sysfs is not None:
        argv += ["--sysfs", str(sysfs)]
    proc = subprocess.run([*argv, *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, argv, proc.stdout, proc.stderr)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture
def skx_sysfs() -> Path:
    return SKX_SYSFS
