"""Figures of merit of an application trial: declared once, read line by line as the output streams.

- `--metric 'NAME[:UNIT][:higher|lower]=REGEX'`: everything after the first '=' is the regular expression, its
  first capture group the value (ReFrame's performance patterns, Ramble's figures of merit). When several
  lines match, the last counts. The first metric given is the headline. Without a direction, a time unit
  (s, ms, us, ns, min, h) is lower-is-better and anything else higher-is-better.
- Patterns are RE2's (app/patterns.py): matched line by line, in time linear in the output, off the loop that
  enforces the trial's time limit; one RE2 cannot take is refused when it is read.
- The headline is compared as ratios (x% slower than the node's median, the fleet's): its value must be > 0.
  A headline <= 0 in a variant's first trial stops the run (exit 2, nothing of the variant stored), in a
  later trial fails that trial; the other figures may have any sign (an energy, an offset) and are stored
  as read.
- `--sanity REGEX`: some line must match, or the trial fails (sanity before performance: no figure then).
- `--iteration-regex REGEX`: every match is an iteration whose value is its first capture group.
- `--format X`: the program reader of the importers (importers/reader.py) reads the figures; the trial takes
  the last result it returns, its first figure as headline.
- Without metric and format the headline is the trial's wall time (lower is better), as hyperfine's.
Each figure keeps the line it was read from (number and text), stored with the run so a user can check it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.app.patterns import ENGINE, LineMatcher, Mode, Pattern, PatternError, compile_pattern
from tailscope.errors import InputError
from tailscope.userfile import UnreadableFile, read_lines

if TYPE_CHECKING:  # imported where a reference is given: the epilog reads figures without the analysis
    from tailscope.analysis.reference import Reference

TIME_UNITS = frozenset({"s", "sec", "seconds", "ms", "us", "µs", "ns", "min", "h", "hours"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
MAX_ITERATIONS = 100_000  # per trial: a program printing more has the first ones kept
RAW_CHARS = 300  # of the line a figure was read from
HEAD_LINES = 200  # lines kept for detecting a program's format (importers.reader.DETECT_LINES)


class FigureError(InputError):
    """A figure declaration that cannot be used (exit 2)."""


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    higher_is_better: bool
    pattern: Pattern
    text: str  # as the user wrote it (stored in the plan)

    @classmethod
    def parse(cls, text: str, *, option: str = "--metric") -> Metric:
        head, sep, regex = text.partition("=")
        if not sep or not regex:
            raise FigureError(f"{option} {text!r}: expected NAME[:UNIT][:higher|lower]=REGEX")
        parts = head.split(":")
        name, unit, direction = parts[0], "", None
        if len(parts) > 3:
            raise FigureError(f"{option} {text!r}: expected NAME[:UNIT][:higher|lower]=REGEX (too many ':')")
        rest = parts[1:]
        if rest and rest[-1] in ("higher", "lower"):
            direction = rest.pop() == "higher"
        if len(rest) > 1:
            raise FigureError(f"{option} {text!r}: the direction is 'higher' or 'lower', got {rest[-1]!r}")
        if rest:
            unit = rest[0]
        if not _NAME.match(name):
            raise FigureError(f"{option} {text!r}: the name {name!r} must be a word (letters, digits, _ . -)")
        pattern = compile_regex(regex, option=option, shown=text)
        if pattern.groups < 1:
            raise FigureError(
                f"{option} {text!r}: the regex needs a capture group around the value, e.g. "
                r"'Performance: ([0-9.]+)'"
            )
        if direction is None:
            direction = unit not in TIME_UNITS
        return cls(name, unit, direction, pattern, text)


def compile_regex(regex: str, *, option: str, shown: str | None = None) -> Pattern:
    try:
        return compile_pattern(regex)
    except PatternError as exc:
        text = regex if shown is None else shown
        raise FigureError(f"{option} {text!r}: not a valid regular expression for {ENGINE} ({exc})") from None


@dataclass(frozen=True)
class FigureSpec:
    metrics: tuple[Metric, ...] = ()
    sanity: Pattern | None = None
    iteration: Pattern | None = None
    format: str | None = None
    metric_file: str | None = None
    reference: Reference | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FigureSpec:
        metrics = tuple(Metric.parse(str(m)) for m in params.get("metrics", []))
        names = [m.name for m in metrics]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise FigureError(f"--metric {dup}: named twice")
        fmt = params.get("format")
        if fmt is not None:
            from tailscope.importers.reader import PROGRAM_FORMATS

            if fmt not in PROGRAM_FORMATS:
                raise FigureError(f"--format {fmt}: expected one of {', '.join(PROGRAM_FORMATS)}")
        sanity = params.get("sanity")
        iteration = params.get("iteration_regex")
        it_pattern = compile_regex(str(iteration), option="--iteration-regex") if iteration else None
        if it_pattern is not None and it_pattern.groups < 1:
            raise FigureError(f"--iteration-regex {iteration!r}: needs a capture group around the value")
        ref = params.get("reference")
        if ref:
            from tailscope.analysis.reference import Reference
        mf = params.get("metric_file")
        if mf is not None and (not mf or os.path.isabs(str(mf)) or ".." in Path(str(mf)).parts):
            raise FigureError(f"--metric-file {mf}: expected a path inside the trial's directory")
        return cls(
            metrics=metrics,
            sanity=compile_regex(str(sanity), option="--sanity") if sanity else None,
            iteration=it_pattern,
            format=str(fmt) if fmt else None,
            metric_file=str(params["metric_file"]) if params.get("metric_file") else None,
            reference=Reference.parse(str(ref)) if ref else None,
        )

    def headline(self) -> HeadlineSpec:
        if self.metrics:
            m = self.metrics[0]
            return HeadlineSpec(m.name, m.unit, m.higher_is_better)
        if self.format:
            return HeadlineSpec(self.format, "", True)  # the reader's first figure names it per trial
        return HeadlineSpec("wall_time", "s", False)


@dataclass(frozen=True)
class HeadlineSpec:
    name: str
    unit: str
    higher_is_better: bool


@dataclass
class Found:
    value: float | None = None
    text: str = ""  # the captured text (to tell a non-number apart)
    line: int = 0
    raw: str = ""


@dataclass
class Scan:
    """One trial's reading of its output (or metric file): fed line by line as it streams. The patterns are
    matched by a LineMatcher (app/patterns.py) off the caller's thread, until `deadline` (time.monotonic());
    `finish()` waits for them, and `error` says why they were not all matched."""

    spec: FigureSpec
    deadline: float | None = None
    found: dict[str, Found] = field(default_factory=dict)
    sane: bool = False
    iterations: list[float] = field(default_factory=list)
    iteration_errors: int = 0
    lines: int = 0
    reader: Any = None  # the program reader of --format, fed every line
    head: list[str] = field(default_factory=list)  # the first HEAD_LINES lines (a format's detection)
    error: str | None = None  # why the patterns were not all matched (the trial fails with it)
    matcher: LineMatcher | None = None
    _kinds: list[tuple[str, str | None]] = field(default_factory=list)  # (metric|sanity|iteration, name)
    _finished: bool = False

    def __post_init__(self) -> None:
        if self.spec.format:
            from tailscope.importers.reader import program_reader

            self.reader = program_reader(self.spec.format)
        patterns: list[tuple[Pattern, Mode]] = []
        for m in self.spec.metrics:
            patterns.append((m.pattern, "last"))  # when several lines match, the last counts
            self._kinds.append(("metric", m.name))
        if self.spec.sanity is not None:
            patterns.append((self.spec.sanity, "first"))
            self._kinds.append(("sanity", None))
        if self.spec.iteration is not None:
            patterns.append((self.spec.iteration, "every"))
            self._kinds.append(("iteration", None))
        if patterns:
            self.matcher = LineMatcher(patterns, self._matched, deadline=self.deadline, wanted=self._wanted)

    def feed(self, line: str) -> None:
        self.lines += 1
        number = self.lines
        if len(self.head) < HEAD_LINES:
            self.head.append(line[:RAW_CHARS])
        if self.matcher is not None:
            self.matcher.add(number, line)
        if self.reader is not None:
            self.reader.feed(number, line)

    def finish(self) -> str | None:
        """Wait for the patterns to be matched (until the deadline); returns `error`."""
        if not self._finished:
            self._finished = True
            if self.matcher is not None:
                self.error = self.matcher.finish()
        return self.error

    def close(self) -> None:
        """Stop matching (the trial is over, or discarded): the matcher's thread ends."""
        if self.matcher is not None:
            self.matcher.close()

    def _wanted(self, i: int) -> bool:
        return self._kinds[i][0] != "iteration" or len(self.iterations) < MAX_ITERATIONS

    def _matched(self, i: int, number: int, line: bytes, groups: tuple[str | None, ...]) -> None:
        """A line one pattern matched (on the matcher's thread; read after `finish()`)."""
        kind, name = self._kinds[i]
        text = (groups[0] if groups else None) or ""
        if kind == "iteration":
            value = _number(text)
            if value is None:
                self.iteration_errors += 1
            elif len(self.iterations) < MAX_ITERATIONS:
                self.iterations.append(value)
        elif kind == "sanity":
            self.sane = True
        elif name is not None:
            raw = line[: RAW_CHARS * 4].decode(errors="replace")[:RAW_CHARS]
            self.found[name] = Found(_number(text), text, number, raw)


def feed_file(
    scan: Scan,
    path: Path | str,
    *,
    limit: int,
    piece: int,
    beneath: Path | str | None = None,
    tail: bool = False,
) -> str | None:
    """A file's lines into `scan` through the one bounded reader (userfile.read_lines: a regular file, inside
    `beneath` when given, at most `limit` bytes, or its last `limit` bytes with `tail`); None, or why it was
    not read (one line naming the path)."""
    try:
        for raw in read_lines(path, limit=limit, piece=piece, beneath=beneath, tail=tail):
            scan.feed(raw.decode(errors="replace"))
    except UnreadableFile as exc:
        return str(exc)
    except OSError as exc:  # a read that failed after the open (EIO on a network file system)
        return f"{path}: {exc.strerror or exc}"
    return None


def format_hint(scan: Scan) -> str | None:
    """With neither --metric nor --format: the built-in reader that knows this output, as a hint."""
    if scan.spec.metrics or scan.spec.format:
        return None
    from tailscope.importers.reader import detect_format

    found = detect_format(scan.head)
    if found is None:
        return None
    return (
        f"tailscope: the output looks like {found}'s: `--format {found}` takes its figures of merit (the "
        "headline now is the wall time)"
    )


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass
class Figures:
    """What a trial yields: the headline (or why it has none) and every figure."""

    headline: tuple[str, float, str, bool] | None  # (name, value, unit, higher_is_better)
    figures: list[dict[str, Any]]
    iterations: list[float]
    error: str | None = None  # a failed trial's reason
    status: str = "ok"  # ok | failed | invalid
    missing_metric: str | None = None  # a figure not matched or not usable (exit 2 on a first trial)


def headline_error(name: str, value: float, where: str) -> str:
    """Why a headline <= 0 cannot be judged (the analysis compares headlines as ratios)."""
    return (
        f"metric {name}: its value {value:g} ({where}) is not > 0, and the headline is compared as ratios "
        "(x% slower than the node's median): make the first --metric a positive figure such as a rate or a "
        f"time, and {name} a later one (any other metric may have any sign)"
    )


def judge(scan: Scan, where: str, wall_s: float) -> Figures:
    """The figures of a finished trial's scan: sanity first, then every metric, then the reader; the headline
    must be > 0 (`headline_error`)."""
    spec = scan.spec
    if scan.finish() is not None:
        timed_out = scan.matcher is not None and scan.matcher.timed_out
        return Figures(None, [], [], f"{where}: {scan.error}", "timeout" if timed_out else "failed")
    figures: list[dict[str, Any]] = []
    iterations = list(scan.iterations)
    if spec.sanity is not None and not scan.sane:
        return Figures(
            None, [], iterations, f"sanity pattern {spec.sanity.text!r} did not match {where}", "failed"
        )
    headline: tuple[str, float, str, bool] | None = None
    for m in spec.metrics:
        f = scan.found.get(m.name)
        if f is None:
            return Figures(
                None,
                figures,
                iterations,
                f"metric {m.name}: no line of {where} matched {m.pattern.text!r}",
                "failed",
                missing_metric=m.name,
            )
        if f.value is None:
            return Figures(
                None,
                figures,
                iterations,
                f"metric {m.name}: {where} line {f.line}: {f.text!r} is not a finite number",
                "failed",
                missing_metric=m.name,
            )
        figures.append(
            {
                "name": m.name,
                "value": f.value,
                "unit": m.unit,
                "higher_is_better": m.higher_is_better,
                "line": f.line,
                "raw": f.raw,
            }
        )
        if headline is None:
            headline = (m.name, f.value, m.unit, m.higher_is_better)
            if not f.value > 0:
                why = headline_error(m.name, f.value, f"{where} line {f.line}")
                return Figures(None, figures, iterations, why, "failed", missing_metric=m.name)
    if scan.reader is not None:
        from tailscope.importers import ImportInputError

        try:
            runs = scan.reader.finish(where)
        except ImportInputError as exc:
            return Figures(None, figures, iterations, str(exc), "failed", missing_metric=spec.format)
        last = runs[-1]
        # one result per row of a table (OSU's sizes: the rows differ in their params): every row's figures
        # and the first row's first as headline; else the last result the program printed
        table = any(dict(r.params) != dict(last.params) for r in runs)
        for run in runs if table else [last]:
            for fig in run.figures:
                entry = {
                    "name": fig.name,
                    "value": fig.value,
                    "unit": fig.unit,
                    "higher_is_better": fig.higher_is_better,
                    "line": fig.line,
                }
                if table:
                    entry["params"] = dict(run.params)
                figures.append(entry)
        if not spec.metrics:
            head = (runs[0] if table else last).figures[0]
            headline = (head.name, head.value, head.unit, head.higher_is_better)
            if not head.value > 0:
                why = headline_error(head.name, head.value, f"{where} line {head.line}")
                return Figures(None, figures, iterations, why, "failed", missing_metric=spec.format)
        if not iterations and last.iterations:
            iterations = list(last.iterations)
        if not last.valid:
            return Figures(
                headline, figures, iterations, last.reason or "the program's result is not valid", "invalid"
            )
    if headline is None:
        headline = ("wall_time", wall_s, "s", False)
    return Figures(headline, figures, iterations)
