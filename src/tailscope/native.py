"""The one way to find a native executable (probes, sampler) shipped with the package.

`pip install .` builds them with CMake and installs them as `tailscope/_native/bin/<name>`, next to
this module. `TAILSCOPE_NATIVE_DIR` points elsewhere (a CMake build tree) for development.
"""

from __future__ import annotations

import os
from pathlib import Path

from tailscope.errors import InputError

NATIVE_DIR_ENV = "TAILSCOPE_NATIVE_DIR"
NATIVE_LIB_DIR_ENV = "TAILSCOPE_NATIVE_LIB_DIR"


class NativeMissingError(InputError, FileNotFoundError):
    """A native executable or library is not where the installed package should have it."""


def native_dir() -> Path:
    override = os.environ.get(NATIVE_DIR_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parent / "_native" / "bin"


def native_path(name: str) -> Path:
    """Absolute path of native executable `name`, or a clear error saying how to build it."""
    path = native_dir() / name
    if not os.access(path, os.X_OK):
        where = (
            f"${NATIVE_DIR_ENV}={os.environ[NATIVE_DIR_ENV]}"
            if os.environ.get(NATIVE_DIR_ENV)
            else str(native_dir())
        )
        raise NativeMissingError(
            f"native executable {name!r} not found in {where}; "
            "install tailscope with `pip install .` (it builds the probes with CMake)"
        )
    return path


def native_library(name: str) -> Path:
    """Absolute path of native shared library `lib<name>.so`, or a clear error saying how to build it.

    Installed next to the executables as `tailscope/_native/lib/`; `TAILSCOPE_NATIVE_LIB_DIR` points at a
    development build directory instead.
    """
    override = os.environ.get(NATIVE_LIB_DIR_ENV)
    directory = Path(override) if override else native_dir().parent / "lib"
    path = directory / f"lib{name}.so"
    if not path.is_file():
        where = f"${NATIVE_LIB_DIR_ENV}={override}" if override else str(directory)
        raise NativeMissingError(
            f"native library lib{name}.so not found in {where}; "
            "install tailscope with `pip install .` (it builds the native libraries with CMake)"
        )
    return path
