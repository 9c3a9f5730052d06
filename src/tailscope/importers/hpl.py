"""HPL results of other runs: xhpl's output (HPL.out or stdout) and hpcc's `hpccoutf.txt`.

One trial per result line. HPL writes, per test (HPL_pdtest.c; hpcc embeds HPL 2.0 in its "HPL section"):

    T/V                N    NB     P     Q               Time                 Gflops
    WR11C2R4        1000   128     1     2               0.28              2.373e+00
    ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0034753 ...... PASSED

The `T/V` field is W (wall time) plus the encoded variant; the residual line that follows says whether the
solve passed HPL's check (scaled residual below the threshold, 16 by default). A result whose residual
FAILED is stored with status `invalid`, no value and no iteration, so it never enters a median (a wrong answer
is not a fast run): the rule `tailscope run hpl` follows, where the probe exits 4 on a FAILED check. A result
without its residual line (the output cut short: a killed run, a full disk) is refused, naming the line where
the output ends, never stored as a valid run. N, NB, P and Q are C ints in HPL: larger is refused. hpcc
appends every run to the same file: each run's HPL section gives one trial, in file order.
Trials are grouped into variants `imported:hpl` with params {n, nb, p, q} (different problem sizes are
different variants), value GFLOPS (higher is better), one iteration (the solve's seconds); the import
itself is importers/programs.py's, as for every program format.

The SJTU acceptance rule (seed 003, "HPL-Light": N = 32768, NB = 128, 500 runs on one node; pass when
(q01 - median) / median > -0.5 %) is then `tailscope analyze DIR --max-q01-drop 0.005`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tailscope.importers.reader import (
    INT_MAX,
    Figure,
    LineError,
    LineReader,
    ProgramRun,
    bounded_int,
    finite,
)

# WR11C2R4  1000  128  1  2  0.28  2.373e+00: variant, N, NB, P, Q, seconds, GFLOPS (HPL_pdtest.c's format)
_RESULT = re.compile(
    r"^(?P<tv>W[RC]\w*)\s+(?P<n>\d+)\s+(?P<nb>\d+)\s+(?P<p>\d+)\s+(?P<q>\d+)\s+"
    r"(?P<time>[0-9.eE+-]+)\s+(?P<gflops>[0-9.eE+-]+)\s*$"
)
# ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   0.0034753 ...... PASSED (HPL 2.x; 1.0 prints 3 lines)
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo.*=\s*(?P<resid>[0-9.eE+-]+)\s+\.+\s+(?P<verdict>PASSED|FAILED)\s*$")
_NO_RESULTS = (
    "no HPL result lines (expected lines like "
    "'WR11C2R4  1000  128  1  2  0.28  2.373e+00' after the 'T/V  N  NB  P  Q  Time  Gflops' header)"
)


@dataclass(frozen=True)
class HplResult:
    line: int  # line of the WR line in the file
    variant_code: str  # WR11C2R4
    n: int
    nb: int
    p: int
    q: int
    seconds: float
    gflops: float
    residual: float | None
    passed: bool | None

    @property
    def params(self) -> dict[str, int]:
        return {"n": self.n, "nb": self.nb, "p": self.p, "q": self.q}


class HplReader(LineReader):
    """xhpl's output (HPL.out or stdout): one ProgramRun per result line and the residual line after it."""

    format = "hpl"

    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[str, Any] | None = None

    def take(self, number: int, line: str) -> None:
        text = line.strip()
        match = _RESULT.match(text)
        if match:
            if self.pending is not None:
                raise LineError(
                    number,
                    f"HPL result of line {self.pending['line']} has no residual check line before the next "
                    "result (expected '||Ax-b||_oo/(...)= RESIDUAL ...... PASSED' or FAILED)",
                )
            p = bounded_int(match["p"], what="P", line=number, low=1)
            q = bounded_int(match["q"], what="Q", line=number, low=1)
            self.pending = {
                "line": number,
                "tv": match["tv"],
                "n": bounded_int(match["n"], what="N", line=number),
                "nb": bounded_int(match["nb"], what="NB", line=number),
                "p": p,
                "q": q,
                "seconds": finite(match["time"], what="Time", line=number),
                "gflops": finite(match["gflops"], what="Gflops", line=number),
            }
            if p * q > INT_MAX:
                raise LineError(
                    number, f"P x Q = {p * q} processes is out of range (expected at most {INT_MAX})"
                )
            return
        match = _RESIDUAL.match(text)
        if match and self.pending is not None:
            self.close_pending(
                number,
                finite(match["resid"], what="scaled residual", line=number),
                match["verdict"] == "PASSED",
            )

    def close_pending(self, number: int, residual: float, passed: bool) -> None:
        r = self.pending
        assert r is not None
        self.pending = None
        figure = Figure("gflops", r["gflops"], "GFLOPS", True, r["line"])
        self.runs.append(
            ProgramRun(
                figures=(figure,),
                params={"n": r["n"], "nb": r["nb"], "p": r["p"], "q": r["q"]},
                iterations=(r["gflops"],) if passed else (),
                valid=passed,
                reason=None if passed else f"HPL residual check FAILED (scaled residual {residual})",
                first_line=r["line"],
                last_line=number,
                seconds=r["seconds"],
                threads=r["p"] * r["q"],
                details={
                    "tv": r["tv"],
                    "residual": residual,
                    "residual_check": "PASSED" if passed else "FAILED",
                },
            )
        )

    def close(self) -> list[ProgramRun]:
        if self.pending is not None:
            raise LineError(
                self.last,
                f"HPL result of line {self.pending['line']} has no residual check line: the output ends here "
                "(cut short? expected "
                "'||Ax-b||_oo/(...)= RESIDUAL ...... PASSED' or FAILED after the result)",
            )
        return self.runs

    def expected(self) -> str:
        return _NO_RESULTS


class HpccReader(HplReader):
    """hpcc's hpccoutf.txt: its HPL section read as xhpl's output (every appended run gives one result)."""

    format = "hpcc"


def detect_hpcc(lines: Sequence[str]) -> bool:
    return any("HPC Challenge Benchmark" in line for line in lines)


def detect_hpl(lines: Sequence[str]) -> bool:
    return any(line.startswith("HPLinpack") or line.startswith("T/V ") for line in lines)


def parse_hpl(text: str, *, source: str = "HPL output") -> list[HplResult]:
    """Every result line of an xhpl or hpcc output, with the residual check that follows it."""
    reader = HplReader()
    for number, line in enumerate(text.splitlines(), start=1):
        reader.feed(number, line)
    runs = reader.finish(source)
    return [_result(run) for run in runs]


def _result(run: ProgramRun) -> HplResult:
    return HplResult(
        line=run.first_line,
        variant_code=str(run.details["tv"]),
        n=int(run.params["n"]),
        nb=int(run.params["nb"]),
        p=int(run.params["p"]),
        q=int(run.params["q"]),
        seconds=float(run.seconds or 0.0),
        gflops=run.figures[0].value,
        residual=run.details["residual"],
        passed=run.valid,
    )
