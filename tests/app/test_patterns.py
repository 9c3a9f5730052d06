"""The user's patterns (app/patterns.py, issue 30): what RE2 takes and refuses, a batch search that finds
exactly the lines a line-by-line search finds, matching that stops at its deadline whatever the pattern, and
the bounded fallback for platforms without RE2."""

from __future__ import annotations

import random
import time
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailscope.app import patterns
from tailscope.app.figures import FigureError, FigureSpec, Metric, Scan, judge
from tailscope.app.patterns import LineMatcher, PatternError, SlowPattern, compile_pattern

pytestmark = pytest.mark.skipif(patterns.ENGINE != "RE2", reason="google-re2 is not installed here")


@pytest.mark.parametrize(
    ("text", "line", "groups"),
    [
        (r"value (?P<v>\S+) (\w+)", "value -6.7 eV", ("-6.7", "eV")),  # named groups count as groups
        (r"Performance: .*, ([0-9.]+) timesteps/s", "Performance: 1.2 ns/day, 785.3 timesteps/s", ("785.3",)),
        (r"^\s+\d+\s+\S+\s+(\S+)", "   100  1.67  -4.78", ("-4.78",)),
        (r"(?i)TOTAL (\d+)", "total 12", ("12",)),
        (r"x(y)?z", "xz", (None,)),
        (r"a\z", "a", ()),
        (r"[[:digit:]]+ (\p{Greek}+)", "12 αβ", ("αβ",)),
    ],
)
def test_re2_takes_pythons_everyday_syntax(text, line, groups):
    assert compile_pattern(text).search(line) == groups


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (r"(a)\1", "RE2 has no backreferences"),
        (r"(?P<v>a)(?P=v)", "RE2 has no backreferences"),
        (r"(?=rate)(\d+)", "RE2 has no lookahead"),
        (r"(?<=rate )(\d+)", "RE2 has no lookbehind"),
        (r"(?<!x)(\d+)", "RE2 has no lookbehind"),
        (r"(\d+)\Z", "RE2 ends the text with \\z, or use $"),
        (r"a++", "bad repetition operator"),
        (r"(?x) a (b)", "RE2 has no verbose mode"),
        (r"(\d+)(?#comment)", "RE2 has no (?#...) comments"),
        (r"(a{1000}){1000}", "invalid repetition size"),
        ("(" + "[0-9a-f]" * 2001 + ")", "more than the 2000 a pattern may have"),
    ],
)
def test_what_re2_cannot_take_is_refused_in_one_line(text, words):
    with pytest.raises(PatternError) as exc:
        compile_pattern(text)
    assert words in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(FigureError, match="not a valid regular expression for RE2"):
        Metric.parse("x=" + text)


# --- a batch finds exactly what each line finds ----------------------------------------------------------
ATOMS = ["a", "b", "1", " ", ".", r"\d", r"\S", r"\s", r"\w", "[ab]", "[^a ]", r"\b", "x"]
ALPHABET = "ab1 .:x\t"


@st.composite
def regexes(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 9 if depth < 2 else 5))
        if kind <= 5:
            part = draw(st.sampled_from(ATOMS))
        elif kind <= 7:
            part = "(" + draw(regexes(depth + 1)) + ")"
        else:
            part = "(" + draw(regexes(depth + 1)) + "|" + draw(regexes(depth + 1)) + ")"
        parts.append(part + draw(st.sampled_from(["", "", "*", "+", "?", "{1,3}", "*?"])))
    text = "".join(parts)
    if depth == 0:
        text = draw(st.sampled_from(["", "^", "(?i)"])) + text + draw(st.sampled_from(["", "$"]))
    return text


@settings(max_examples=150, deadline=None)
@given(
    text=regexes(),
    lines=st.lists(st.text(ALPHABET, max_size=12), max_size=40),
    batch=st.sampled_from([1, 7, 64, 1 << 16]),
)
def test_a_batch_search_finds_what_each_line_finds(text, lines, batch):
    """LineMatcher's batches (lines joined, `(?m)` and never_nl, the last line found by a binary search)
    against the plain line-by-line search with the same RE2 pattern: the same last, first and every line."""
    pattern = compile_pattern(text)
    each = [(n, pattern.search(line)) for n, line in enumerate(lines, start=1)]
    matched = [(n, g) for n, g in each if g is not None]
    seen: list[tuple[int, str, object]] = []
    with mock.patch.object(patterns, "BATCH", batch):
        matcher = LineMatcher(
            [(pattern, "last"), (pattern, "first"), (pattern, "every")],
            lambda i, n, line, groups: seen.append((("last", "first", "every")[i], n, groups)),
            deadline=time.monotonic() + 60,
        )
        for n, line in enumerate(lines, start=1):
            matcher.add(n, line)
        assert matcher.finish() is None
    assert [(n, g) for kind, n, g in seen if kind == "every"] == matched
    assert [(n, g) for kind, n, g in seen if kind == "first"] == matched[:1]
    assert [(n, g) for kind, n, g in seen if kind == "last"] == matched[-1:]


def test_patterns_whose_batch_meaning_differs_are_searched_line_by_line():
    lines = ["xa", "ab", "a"]
    for text, want in ((r"\Aa", [2, 3]), (r"b\z", [2]), (r"(?i)(?-i:A)", [])):
        seen: list[int] = []
        matcher = LineMatcher([(compile_pattern(text), "every")], lambda i, n, line, g, to=seen: to.append(n))
        for n, line in enumerate(lines, start=1):
            matcher.add(n, line)
        matcher.finish()
        assert seen == want, text


# --- the time the patterns take -------------------------------------------------------------------------
def test_the_hostile_regexes_of_issue_30_take_milliseconds():
    """`.*rate ([0-9.]+)` after a MiB of x, `^(a+)+$` on a MiB of a then b: Python's re took 40-48 s each."""
    for text, line, want in (
        (r"v=.*rate ([0-9.]+)", "x" * (1 << 20) + "rate 5.0", 5.0),
        (r"v=^(a+)+$", "a" * (1 << 20) + "b", None),
    ):
        spec = FigureSpec.from_params({"metrics": [text]})
        start = time.monotonic()
        scan = Scan(spec, deadline=start + 30)
        scan.feed(line)
        figures = judge(scan, "the output", 1.0)
        assert time.monotonic() - start < 5.0
        assert (figures.headline[1] if figures.headline else None) == want, figures.error


def test_matching_stops_at_its_deadline_whatever_the_pattern():
    """A pattern RE2 is slow on (`a[ab]{900}(c)`: its DFA does not fit, every byte costs ~900 NFA steps) over
    8 MiB of output: add() never waits on it, finish() returns at the deadline, the trial fails saying so."""
    rng = random.Random(30)
    spec = FigureSpec.from_params({"metrics": ["v=a[ab]{900}(c)"]})
    lines = ["".join(rng.choice("ab") for _ in range(4096)) for _ in range(64)]
    start = time.monotonic()
    scan = Scan(spec, deadline=start + 1.0)
    for _ in range(32):  # 8 MiB
        for line in lines:
            scan.feed(line)
    fed = time.monotonic() - start
    figures = judge(scan, "the output", 1.0)
    took = time.monotonic() - start
    scan.close()
    assert fed < 1.0 + 0.5, f"feeding waited {fed:.2f} s for the patterns"
    assert took < 1.0 + 0.5, f"finish() returned {took:.2f} s after the start, the deadline was 1 s"
    assert figures.status == "timeout" and "not matched within the trial time limit" in str(figures.error)


def test_the_fallback_without_re2_is_bounded(monkeypatch):
    """Where no google-re2 wheel exists: Python's re, each search stopped by a timer, each line cut."""
    slow = patterns._FallbackPattern(r"^(a+)+$")
    start = time.monotonic()
    with pytest.raises(SlowPattern):
        slow.match_line(b"a" * 64 + b"b")
    assert time.monotonic() - start < patterns.FALLBACK_CALL_S + 10.0  # CPU s: busy machines stretch them
    monkeypatch.setattr(patterns, "_core", None)
    monkeypatch.setattr(patterns, "_re2_module", None)
    pattern = compile_pattern(r"v (\d+)")
    assert isinstance(pattern, patterns._FallbackPattern) and pattern.search("v 12") == ("12",)
    with pytest.raises(PatternError):
        compile_pattern("(unclosed")
    spec = FigureSpec.from_params({"metrics": [r"v=^(a+)+$"]})
    scan = Scan(spec, deadline=time.monotonic() + 30)
    start = time.monotonic()
    scan.feed("a" * 64 + "b")
    figures = judge(scan, "the output", 1.0)
    assert time.monotonic() - start < patterns.FALLBACK_CALL_S + 10.0  # CPU s: busy machines stretch them
    assert figures.status == "failed" and "took more than 0.5 s of CPU" in str(figures.error)
