"""Code addresses (object + offset, from the OMPT tool's dladdr) to function and file:line with addr2line.

The tool records `codeptr_ra`, a return address: the call it returns from ends one byte earlier, so the
address looked up is offset - 1 (for a position-independent object; for a non-PIE executable,
base + offset - 1, its link-time address). With -i, inlined frames follow one another; the first is the
innermost, the source line
of the construct. Objects without debug information resolve to "??" and keep their object and offset.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ET_EXEC = 2


@dataclass(frozen=True)
class Location:
    function: str | None
    file: str | None
    line: int | None
    symbol: str | None = None  # the function the code is in (the outermost of the inlined frames)


OUTLINED = ("._omp_fn.", ".omp_outlined.")  # gcc's and clang's names of a construct's outlined function


def is_outlined(symbol: str | None) -> bool:
    return bool(symbol) and any(mark in str(symbol) for mark in OUTLINED)


def _elf_type(path: Path) -> int | None:
    try:
        with path.open("rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


def _parse(out: str) -> list[Location]:
    """addr2line -a -f -i output: an address line, then (function, file:line) pairs, per address."""
    groups: list[list[str]] = []
    for line in out.splitlines():
        if line.startswith("0x"):
            groups.append([])
        elif groups:
            groups[-1].append(line)
    result = []
    for lines in groups:
        function = lines[0] if lines else "??"
        where = lines[1] if len(lines) > 1 else "??:0"
        file, _, num = where.partition(":")
        num = num.split(" ")[0]  # "12 (discriminator 3)"
        outermost = lines[-2] if len(lines) >= 2 else function
        result.append(
            Location(
                None if function == "??" else function,
                None if file in ("??", "") else file,
                int(num) if num.isdigit() and int(num) > 0 else None,
                None if outermost == "??" else outermost,
            )
        )
    return result


def resolve(obj: str, base: int, offsets: list[int]) -> dict[int, Location]:
    """offset -> Location for one object; unresolvable ones are left out."""
    path = Path(obj)
    if not offsets or not path.is_file():
        return {}
    shift = base if _elf_type(path) == ET_EXEC else 0
    addresses = [f"{off + shift - 1:#x}" for off in offsets]
    try:
        out = subprocess.run(
            ["addr2line", "-a", "-f", "-i", "-C", "-e", str(path)],
            input="\n".join(addresses) + "\n",
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    locations = _parse(out.stdout)
    if len(locations) != len(offsets):
        return {}
    return dict(zip(offsets, locations, strict=True))


_CALL_SITE = re.compile(r"DW_TAG_(?:GNU_)?call_site\b")
_RETURN_PC = re.compile(r"DW_AT_(?:call_return_pc|low_pc)\s*:.*?(0x[0-9a-f]+)\s*$")
_ADDR_VALUE = re.compile(r"DW_AT_(?:call_value|GNU_call_site_value)\s*:.*\(DW_OP_addr: ([0-9a-f]+)\)")


def call_site_values(obj: str, base: int) -> dict[int, list[int]]:
    """Return offset of each call in `obj`'s DWARF call-site information -> the code or data addresses (as
    offsets) its arguments are known to hold (DW_OP_addr values). For the runtime call that starts a parallel
    region (gcc: GOMP_parallel's first argument) one of them is the outlined function. Empty without
    DWARF call sites (clang does not describe its __kmpc_fork_call calls) or without readelf."""
    path = Path(obj)
    if not path.is_file():
        return {}
    shift = base if _elf_type(path) == ET_EXEC else 0
    try:  # streamed: the dump of a large application's DWARF is far larger than what is kept
        proc = subprocess.Popen(
            ["readelf", "--wide", "--debug-dump=info", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    except OSError:
        return {}
    try:
        return _call_sites(proc.stdout or [], shift)
    finally:
        proc.kill()
        proc.wait()


def _call_sites(lines: Iterable[str], shift: int, seconds: float = 120.0) -> dict[int, list[int]]:
    """Parse readelf's dump; after `seconds` what was found so far (the outlined functions are extra)."""
    sites: dict[int, list[int]] = {}
    current: int | None = None
    in_site = False
    deadline = time.monotonic() + seconds
    for n, line in enumerate(lines):
        if n % 65536 == 0 and time.monotonic() > deadline:
            break
        if "DW_TAG_" in line:
            if _CALL_SITE.search(line):
                in_site, current = True, None
            elif "call_site_parameter" not in line:
                in_site, current = False, None
            continue
        if not in_site:
            continue
        m = _RETURN_PC.search(line)
        if m and current is None:
            current = int(m.group(1), 16) - shift
            sites.setdefault(current, [])
            continue
        v = _ADDR_VALUE.search(line)
        if v and current is not None:
            sites[current].append(int(v.group(1), 16) - shift)
    return {pc: values for pc, values in sites.items() if values}
