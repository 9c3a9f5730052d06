"""The one program-reader interface: a program's text output (stdout, stderr or a result file) in, its figures
of merit out.

A reader is fed the lines as they come (`feed(number, line)`: a trial's output streaming, or a file read
line by line) and `finish(where)` returns one `ProgramRun` per result the program printed, or raises
`ImportInputError("{where}:{line}: ...")` when the text is truncated or malformed. The same reader serves
`tailscope import FORMAT FILE` (importers/programs.py turns its runs into store rows through the one
runs-row builder, store/runs_row.py) and `tailscope run --format FORMAT -- CMD` (one fresh reader per trial;
the trial takes the LAST run's figures).

Formats (modules of this package, loaded on first use): hpl and hpcc (importers/hpl.py); lammps, gromacs,
stream, npb and osu (importers/program_formats.py).
`detect_format` names the format of an output from its first ~200 lines, or None.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tailscope.importers import ImportInputError

# The largest integer a program's parameter may hold (a C int, as HPL's N, NB, P, Q and LAMMPS's procs are).
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Figure:
    """One figure of merit a program printed."""

    name: str  # 'gflops', 'loop_time', 'ns_per_day', 'triad', 'mops_total', 'latency' ...
    value: float  # finite, always (a NaN/inf figure is an ImportInputError naming the line)
    unit: str  # 'GFLOPS', 's', 'ns/day', 'MB/s', 'Mop/s', 'us' ...
    higher_is_better: bool
    line: int  # 1-based line of the text where it was read


@dataclass(frozen=True)
class ProgramRun:
    """One result a program printed = one trial."""

    figures: tuple[Figure, ...]  # the first is the headline
    params: Mapping[str, str | int | float]  # what makes it a variant (HPL: n nb p q; OSU: size ...)
    iterations: tuple[float, ...] = ()  # per-iteration values where the program prints them
    valid: bool = True  # False: e.g. HPL residual FAILED (stored status 'invalid')
    reason: str | None = None  # why not valid
    first_line: int = 0
    last_line: int = 0
    seconds: float | None = None  # the result's own time where the program prints it (HPL's Time column)
    threads: int | None = None  # processes x threads where the program says (HPL: P*Q; LAMMPS: N procs)
    details: Mapping[str, Any] = field(default_factory=dict)  # kept in the run's summary (HPL: tv, residual)


class ProgramReader(Protocol):
    format: str  # 'hpl', 'hpcc', 'lammps', 'gromacs', 'stream', 'npb', 'osu'

    def feed(self, number: int, line: str) -> None: ...  # one line (called as a trial's output streams)

    def finish(self, where: str) -> list[ProgramRun]: ...  # ImportInputError(f"{where}:{line}: ...")


# format -> (module, factory name); the module defines the reader and a `detect_<format>(lines) -> bool`.
_FORMATS: dict[str, tuple[str, str]] = {
    "hpcc": ("tailscope.importers.hpl", "HpccReader"),
    "hpl": ("tailscope.importers.hpl", "HplReader"),
    "lammps": ("tailscope.importers.program_formats", "LammpsReader"),
    "gromacs": ("tailscope.importers.program_formats", "GromacsReader"),
    "stream": ("tailscope.importers.program_formats", "StreamReader"),
    "npb": ("tailscope.importers.program_formats", "NpbReader"),
    "osu": ("tailscope.importers.program_formats", "OsuReader"),
}
PROGRAM_FORMATS: tuple[str, ...] = tuple(_FORMATS)
DETECT_LINES = 200


def _factory(format: str) -> Callable[[], ProgramReader]:
    if format not in _FORMATS:
        raise ImportInputError(
            f"unknown program format {format!r} (expected one of {', '.join(PROGRAM_FORMATS)})"
        )
    module, name = _FORMATS[format]
    factory: Callable[[], ProgramReader] = getattr(importlib.import_module(module), name)
    return factory


def program_reader(format: str) -> ProgramReader:
    """A fresh reader of `format`; an unknown format is an ImportInputError."""
    return _factory(format)()


def detect_format(lines: Sequence[str]) -> str | None:
    """The program format of an output, from its first lines (hpcc before hpl: hpcc's output holds HPL's)."""
    head = list(lines[:DETECT_LINES])
    for format, (module, _) in _FORMATS.items():
        detect: Callable[[Sequence[str]], bool] = getattr(importlib.import_module(module), f"detect_{format}")
        if detect(head):
            return format
    return None


def read_program(format: str, lines: Sequence[str] | Any, where: str) -> list[ProgramRun]:
    """Feed `lines` (strings, numbered from 1, or (number, line) pairs) to a fresh reader and finish it."""
    reader = program_reader(format)
    for number, item in enumerate(lines, start=1):
        if isinstance(item, tuple):
            reader.feed(item[0], item[1])
        else:
            reader.feed(number, item)
    return reader.finish(where)


# Helpers the readers share: numbers as one clear line each, never a traceback.
def finite(text: str, *, what: str, line: int) -> float:
    """`text` as a finite float, else a LineError naming the line."""
    try:
        value = float(text)
    except ValueError:
        raise LineError(line, f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise LineError(line, f"{what} {text!r} is not a finite number")
    return value


def bounded_int(text: str, *, what: str, line: int, low: int = 0, high: int = INT_MAX) -> int:
    """`text` as an integer within [low, high], else a LineError naming the bound."""
    try:
        value = int(text)
    except ValueError:
        raise LineError(line, f"{what} {text!r} is not an integer") from None
    if not low <= value <= high:
        shown = text if len(text) <= 24 else text[:20] + "..."
        raise LineError(line, f"{what} {shown} is out of range (expected {low}..{high})")
    return value


class LineError(Exception):
    """A reader's complaint about one line, before it knows the file's name: `located(where)` turns it into
    the ImportInputError "{where}:{line}: {message}"."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line, self.message = line, message

    def located(self, where: str) -> ImportInputError:
        return ImportInputError(f"{where}:{self.line}: {self.message}")


class LineReader:
    """Base of the readers: keeps the last line number fed and the first complaint, raised at `finish` with
    the file's name (so `feed` can be called before the caller knows where the text comes from), and the
    runs read so far (`runs`; a reader whose result spans lines keeps it pending until `flush`)."""

    format = ""

    def __init__(self) -> None:
        self.last = 0
        self.error: LineError | None = None
        self.runs: list[ProgramRun] = []

    def feed(self, number: int, line: str) -> None:
        self.last = number
        if self.error is not None:
            return
        try:
            self.take(number, line.rstrip("\r\n"))
        except LineError as exc:
            self.error = exc

    def take(self, number: int, line: str) -> None:  # pragma: no cover - every reader defines it
        raise NotImplementedError

    def finish(self, where: str) -> list[ProgramRun]:
        if self.error is not None:
            raise self.error.located(where)
        try:
            runs = self.close()
        except LineError as exc:
            raise exc.located(where) from None
        if not runs:
            raise ImportInputError(f"{where}: {self.expected()}")
        return runs

    def flush(self) -> None:
        """Store the result still pending, if any (the readers that keep one define it)."""

    def close(self) -> list[ProgramRun]:
        """The runs read, once the output has ended."""
        self.flush()
        return self.runs

    def expected(self) -> str:  # pragma: no cover - every reader defines it
        return f"no {self.format} result lines"
