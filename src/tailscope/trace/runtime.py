"""Which OpenMP runtime a program uses, and how to run it on one that implements OMPT.

GCC's libgomp has no OMPT; LLVM's libomp (and Intel's libiomp5, built from the same source) does. libomp
exports the GOMP_* ABI too, so a gcc-built program runs on it when the dynamic linker finds libomp under the
name `libgomp.so.1`: `prepare` makes a directory holding that link and puts it first on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tailscope.trace.errors import TraceInputError

LIBOMP_ENV = "TAILSCOPE_LIBOMP"
_LIBOMP_CANDIDATES = (
    "/usr/lib/llvm-*/lib/libomp.so.5",
    "/usr/lib/x86_64-linux-gnu/libomp.so.5",
    "/usr/lib64/libomp.so",
    "/usr/local/lib/libomp.so",
)
_LDD_LINE = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)")
RUNTIMES = {"libgomp.so.1": "gnu", "libomp.so.5": "llvm", "libomp.so": "llvm", "libiomp5.so": "intel"}


@dataclass(frozen=True)
class Runtime:
    """The OpenMP runtime `program` loads: its family (gnu | llvm | intel), soname and resolved path."""

    family: str
    soname: str
    path: str

    @property
    def has_ompt(self) -> bool:
        return self.family in ("llvm", "intel")


def resolve_program(program: str) -> Path:
    """The program's path (a bare name is looked up on PATH), or a clear error."""
    path = Path(program) if "/" in program else Path(shutil.which(program) or program)
    if not path.is_file():
        raise TraceInputError(f"{program}: no such program (give a path or a name on PATH)")
    if not os.access(path, os.X_OK):
        raise TraceInputError(f"{program}: not executable")
    with path.open("rb") as f:
        if f.read(4) != b"\x7fELF":
            raise TraceInputError(
                f"{program}: not an ELF executable; trace the program itself, not a script that starts it"
            )
    return path.resolve()


def detect(program: Path) -> Runtime | None:
    """The OpenMP runtime in `ldd PROGRAM` (direct or through another library), or None."""
    try:
        out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TraceInputError(f"{program}: cannot run ldd ({exc})") from exc
    found: list[Runtime] = []
    for line in out.stdout.splitlines():
        m = _LDD_LINE.match(line)
        if m and m.group(1) in RUNTIMES:
            found.append(Runtime(RUNTIMES[m.group(1)], m.group(1), m.group(2)))
    if not found:
        return None
    # a program linking two runtimes: the one with OMPT wins only if it is the one that runs the regions,
    # which ldd cannot tell; report the first, as the dynamic linker binds GOMP_/__kmpc_ symbols to it.
    return found[0]


def find_libomp() -> Path | None:
    """LLVM's libomp.so.5: $TAILSCOPE_LIBOMP, else the newest of the usual places."""
    env = os.environ.get(LIBOMP_ENV)
    if env:
        path = Path(env)
        if not path.is_file():
            raise TraceInputError(f"${LIBOMP_ENV}={env}: no such file (expected LLVM's libomp.so.5)")
        return path
    for pattern in _LIBOMP_CANDIDATES:
        hits = sorted(glob.glob(pattern), reverse=True)
        if hits:
            return Path(hits[0])
    return None


@dataclass(frozen=True)
class Plan:
    """How the program is run: its runtime, the runtime it will run on, and the environment to add."""

    runtime: Runtime
    runs_on: str
    env: dict[str, str]


def prepare(program: Path, workdir: Path) -> Plan:
    """Decide how to run `program` under OMPT; refuse with one line when it cannot be done."""
    runtime = detect(program)
    if runtime is None:
        raise TraceInputError(
            f"{program}: no OpenMP runtime among its shared libraries (ldd shows no libgomp.so.1, "
            "libomp.so or libiomp5.so); a statically linked or non-OpenMP program cannot be traced"
        )
    if runtime.has_ompt:
        return Plan(runtime, runtime.path, {})
    libomp = find_libomp()
    if libomp is None:
        raise TraceInputError(
            f"{program}: uses GCC's libgomp ({runtime.path}), which implements no OMPT, and LLVM's libomp "
            f"was not found to run it on; install it (Debian: libomp5-14) or set "
            f"${LIBOMP_ENV}=/path/libomp.so.5"
        )
    linkdir = workdir / "libomp-as-libgomp"
    linkdir.mkdir(parents=True, exist_ok=True)
    link = linkdir / "libgomp.so.1"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(libomp)
    path = os.environ.get("LD_LIBRARY_PATH", "")
    return Plan(runtime, str(libomp), {"LD_LIBRARY_PATH": f"{linkdir}:{path}" if path else str(linkdir)})
