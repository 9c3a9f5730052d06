"""Fixtures of the addr tests: the native kernel, printed random seeds (builders: addr_builders.py).

The kernel library is found like the product finds it (`tailscope.addr.kernel.library_path`: the installed
package, or $TAILSCOPE_NATIVE_LIB_DIR). When neither has it (a source checkout run with PYTHONPATH=src),
it is built once per session from native/addr with CMake into a temporary directory.

Random data: every test draws its addresses from `rng`, seeded at random per run; the seed is printed in
the test's setup output (shown on failure) and can be fixed with TAILSCOPE_TEST_SEED=N to reproduce.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tailscope.addr import kernel
from tailscope.native import NATIVE_LIB_DIR_ENV, NativeMissingError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session", autouse=True)
def addr_library(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    try:
        yield kernel.library_path()
        return
    except NativeMissingError as missing:
        if not shutil.which("cmake"):
            pytest.fail(f"{missing} (and cmake is not available to build native/addr)")
    build = tmp_path_factory.mktemp("addr-build")
    subprocess.run(
        ["cmake", "-S", str(ROOT / "native" / "addr"), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    old = os.environ.get(NATIVE_LIB_DIR_ENV)
    os.environ[NATIVE_LIB_DIR_ENV] = str(build)
    kernel._library.cache_clear()
    try:
        yield kernel.library_path()
    finally:
        if old is None:
            os.environ.pop(NATIVE_LIB_DIR_ENV, None)
        else:
            os.environ[NATIVE_LIB_DIR_ENV] = old


@pytest.fixture
def seed() -> int:
    value = int(os.environ.get("TAILSCOPE_TEST_SEED") or secrets.randbits(32))
    print(f"random seed {value} (reproduce with TAILSCOPE_TEST_SEED={value})")
    return value


@pytest.fixture
def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)
