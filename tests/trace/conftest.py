"""Fixtures of the trace tests: the jacobi example built with gcc and clang, fake sysfs topologies."""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_tools import COMPILERS, JACOBI, build_openmp, make_sysfs

from tailscope.native import NativeMissingError, native_library


@pytest.fixture(scope="session")
def tool_library() -> Path:
    try:
        return native_library("tailscope_ompt")
    except NativeMissingError as exc:
        pytest.fail(f"{exc} (the OMPT tool needs omp-tools.h: Debian libomp-14-dev)")


@pytest.fixture(scope="session", params=sorted(COMPILERS))
def jacobi(request, tmp_path_factory) -> tuple[str, Path]:
    """(compiler, binary) of the jacobi example, -O2 -g."""
    name = request.param
    return name, build_openmp(name, JACOBI, tmp_path_factory.mktemp(f"jacobi-{name}") / "jacobi")


@pytest.fixture
def sysfs_2s(tmp_path) -> Path:
    """Two sockets of one CPU each: this VM's CPU 1 becomes socket 1."""
    return make_sysfs(tmp_path / "sysfs-2s", 2, 1)


@pytest.fixture
def sysfs_4s(tmp_path) -> Path:
    return make_sysfs(tmp_path / "sysfs-4s", 4, 2)


@pytest.fixture
def pinned(monkeypatch):
    """Two OpenMP threads pinned to CPUs 0 and 1 (thread_num == CPU)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setenv("OMP_PLACES", "{0},{1}")
    monkeypatch.setenv("OMP_PROC_BIND", "close")
