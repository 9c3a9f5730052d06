"""The regular expressions a user gives (`--metric`, `--sanity`, `--iteration-regex`) and their matching,
which no pattern and no output can turn into a hang.

- Engine: RE2 (the `google-re2` wheels): its time is linear in the text whatever the pattern, so the
  catastrophic backtracking of Python's `re` (`^(a+)+$` on `aaa...ab`, `.*rate` on a megabyte without it)
  cannot happen. Its syntax is Python's without backreferences (`\\1`, `(?P=name)`), lookaround (`(?=`,
  `(?!`, `(?<=`, `(?<!`), possessive quantifiers and atomic groups, `(?#...)` comments and `(?x)`; the text
  ends with `\\z` (Python's `\\Z` is refused: write `$`), and `\\d`, `\\w`, `\\s`, `\\b` are ASCII. A pattern
  RE2 cannot take, or one of more than MAX_PROGRAM instructions, is refused when it is read (exit 2).
- One line at a time: a pattern's groups are those of its leftmost match in a line; a line is what the
  launcher hands on (one longer than 1 MiB comes in 1 MiB pieces, each a line here).
- Off the time-limit loop: `LineMatcher` takes lines as they stream and matches them in batches on a thread
  of its own (RE2 releases the GIL while it searches), so the loop that enforces `--timeout` never waits for
  a pattern. Up to MAX_BACKLOG characters wait to be matched (beyond, the output waits, as a full pipe
  makes a program wait); what is not matched by the trial's deadline fails the trial, saying so.
- A batch is searched as one text: the pattern is compiled a second time with `(?m)` and RE2's never_nl (no
  match crosses a newline), so a search of the batch finds exactly the lines that match (a DFA pass over
  16 KiB of lines that do not match costs about what one call on one line costs). A metric needs only the
  last line that matches (found by a doubling then binary search from the batch's end, without groups; its
  groups are read once, at the end), a sanity pattern the first, an iteration pattern every one. Patterns
  whose meaning could differ in a batch (`\\A`, `\\z`, `\\C`, a flag group that clears a flag) are searched
  line by line.
- Without RE2 (no wheel for this platform): Python's `re` in the calling thread, each line cut to
  FALLBACK_PIECE characters and each search stopped after FALLBACK_CALL_S of CPU time by a timer where the
  caller is the main thread (the first stop fails the trial, naming the pattern and the line).
"""

from __future__ import annotations

import atexit
import re
import signal
import threading
import time
import weakref
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any, Literal

try:  # a wheel for x86-64 and aarch64 glibc (pyproject.toml); elsewhere the bounded fallback below
    import re2 as _re2_module
    from re2 import _re2 as _core
except ImportError:  # pragma: no cover - the engine of platforms without a google-re2 wheel
    _re2_module = None
    _core = None

ENGINE = "RE2" if _core is not None else "Python re (bounded)"
BATCH = 16 * 1024  # characters handed to the matching thread at once (one search: short at exit)
MAX_BACKLOG = 64 * 1024 * 1024  # characters waiting to be matched before the output waits for them
MAX_PROGRAM = 2000  # RE2 instructions: a byte of text costs at most this many steps (about 10 ns each)
FALLBACK_PIECE = 16 * 1024
FALLBACK_CALL_S = 0.5
# Text whose meaning in a batch (many lines, multi-line mode) could differ from its meaning in one line:
# `\A`, `\z` (start and end of the text), `\C` (any byte, a newline too), a flag group clearing a flag.
_LINE_ONLY = re.compile(r"\\[ACz]|\(\?[a-zA-Z]*-")

Mode = Literal["last", "first", "every"]
Groups = tuple[str | None, ...]


class PatternError(ValueError):
    """A pattern the engine cannot take; the message is the engine's reason."""


class SlowPattern(Exception):
    """The fallback engine's timer stopped a search (never raised with RE2)."""


def compile_pattern(text: str) -> Pattern:
    """The pattern of `text`, or PatternError saying why the engine refuses it."""
    return _Re2Pattern(text) if _core is not None else _FallbackPattern(text)


class Batch:
    """Lines searched together: `blob` (UTF-8, joined by newlines), each line's number and offset."""

    __slots__ = ("blob", "encoded", "numbers", "starts")

    def __init__(self, lines: Sequence[tuple[int, str]]) -> None:
        self.numbers = [n for n, _ in lines]
        self.encoded = [t.encode(errors="replace") for _, t in lines]
        self.blob = b"\n".join(self.encoded)
        self.starts = list(accumulate((len(e) + 1 for e in self.encoded), initial=0))

    def __len__(self) -> int:
        return len(self.encoded)

    def span(self, lo: int, hi: int) -> tuple[int, int]:
        """Byte offsets of lines lo..hi-1 in the blob (the newline after the last one left out)."""
        return self.starts[lo], self.starts[hi] - 1

    def line_at(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1


class Pattern:
    """A compiled user pattern: `text` as given, `groups` its capture groups."""

    text: str
    groups: int

    def match_line(self, line: bytes) -> Groups | None:
        """The groups of the leftmost match in one line (UTF-8, no newline), or None."""
        raise NotImplementedError

    def first(self, batch: Batch, lo: int, hi: int) -> int | None:
        """The first of lines lo..hi-1 that matches."""
        for k in range(lo, hi):
            if self.match_line(batch.encoded[k]) is not None:
                return k
        return None

    def every(self, batch: Batch, lo: int, hi: int) -> Iterator[tuple[int, Groups]]:
        """Each of lines lo..hi-1 that matches, in order, with the groups of its leftmost match."""
        for k in range(lo, hi):
            groups = self.match_line(batch.encoded[k])
            if groups is not None:
                yield k, groups

    def last(self, batch: Batch, lo: int, hi: int) -> int | None:
        """The last of lines lo..hi-1 that matches."""
        for k in range(hi - 1, lo - 1, -1):
            if self.match_line(batch.encoded[k]) is not None:
                return k
        return None

    def search(self, line: str) -> Groups | None:
        return self.match_line(line.encode(errors="replace"))


class _Re2Pattern(Pattern):
    def __init__(self, text: str) -> None:
        self.text = text
        try:
            encoded = text.encode()
        except UnicodeEncodeError:
            raise PatternError("not UTF-8 text") from None
        self._line = _compile(encoded)
        size = self._line.ProgramSize()
        if size > MAX_PROGRAM:
            raise PatternError(
                f"it compiles to {size} RE2 instructions, more than the {MAX_PROGRAM} a pattern may have "
                "(a long counted repetition such as {1000}, or many Unicode classes)"
            )
        self.groups = self._line.NumberOfCapturingGroups()
        self._batch = self._batch_groups = None
        if not _LINE_ONLY.search(text):
            self._batch = _compile(b"(?m)" + encoded, batch=True, groups=False)
            self._batch_groups = _compile(b"(?m)" + encoded, batch=True)

    def match_line(self, line: bytes) -> Groups | None:
        spans = self._line.Match(_UNANCHORED, line, 0, len(line))
        if spans[0][0] < 0:
            return None
        return tuple(line[s:e].decode(errors="replace") if s >= 0 else None for s, e in spans[1:])

    def _at(self, batch: Batch, lo: int, hi: int) -> int:
        """The offset of the batch search's first match in lines lo..hi-1, or -1."""
        assert self._batch is not None
        pos, end = batch.span(lo, hi)
        return int(self._batch.Match(_UNANCHORED, batch.blob, pos, end)[0][0])

    def first(self, batch: Batch, lo: int, hi: int) -> int | None:
        if self._batch is None:
            return super().first(batch, lo, hi)
        if lo >= hi:
            return None
        at = self._at(batch, lo, hi)
        return None if at < 0 else batch.line_at(at)

    def every(self, batch: Batch, lo: int, hi: int) -> Iterator[tuple[int, Groups]]:
        if self._batch_groups is None:
            yield from super().every(batch, lo, hi)
            return
        blob, starts, match = batch.blob, batch.starts, self._batch_groups.Match
        pos, end = batch.span(lo, hi)
        while pos <= end:
            spans = match(_UNANCHORED, blob, pos, end)
            at = spans[0][0]
            if at < 0:
                return
            k = bisect_right(starts, at) - 1
            yield k, tuple(blob[s:e].decode(errors="replace") if s >= 0 else None for s, e in spans[1:])
            pos = starts[k + 1]

    def last(self, batch: Batch, lo: int, hi: int) -> int | None:
        if self._batch is None:
            return super().last(batch, lo, hi)
        if lo >= hi or self._at(batch, lo, hi) < 0:
            return None
        width = 1  # lines hi-width..hi-1 searched, doubling until one matches
        while self._at(batch, max(lo, hi - width), hi) < 0:
            width *= 2
        low, high = max(lo, hi - width), hi - width // 2  # the last match starts in low..high-1
        while high - low > 1:  # no match in high..hi-1: halve low..high-1
            middle = (low + high) // 2
            if self._at(batch, middle, hi) >= 0:
                low = middle
            else:
                high = middle
        return low


class _FallbackPattern(Pattern):
    def __init__(self, text: str) -> None:
        self.text = text
        try:
            self._regexp = re.compile(text)
        except re.error as exc:
            raise PatternError(str(exc)) from None
        self.groups = self._regexp.groups

    def match_line(self, line: bytes) -> Groups | None:
        text = line.decode(errors="replace")[:FALLBACK_PIECE]
        match = _timed(self._regexp.search, text)
        return None if match is None else match.groups()


def _compile(encoded: bytes, *, batch: bool = False, groups: bool = True) -> Any:
    assert _re2_module is not None and _core is not None
    options = _re2_module.Options()
    options.log_errors = False  # RE2 would print every refused pattern on stderr
    options.never_nl = batch  # no match crosses a newline: searching lines joined is searching each line
    options.never_capture = not groups
    regexp = _core.RE2(encoded, options)
    if not regexp.ok():
        raise PatternError(_reason(regexp.error()))
    return regexp


def _reason(error: bytes | str) -> str:
    text = error.decode(errors="replace") if isinstance(error, bytes) else str(error)
    hints = (
        ("\\Z", "RE2 ends the text with \\z, or use $"),
        ("(?=", "RE2 has no lookahead: capture the value and match what follows it"),
        ("(?!", "RE2 has no lookahead"),
        ("(?<=", "RE2 has no lookbehind: match what precedes the value, then capture it"),
        ("(?<!", "RE2 has no lookbehind"),
        ("(?P=", "RE2 has no backreferences"),
        ("operator: (?P", "RE2 has no backreferences; a named group is (?P<name>...)"),
        ("invalid escape sequence: \\1", "RE2 has no backreferences"),
        ("(?#", "RE2 has no (?#...) comments"),
        ("(?x", "RE2 has no verbose mode"),
    )
    hint = next((h for key, h in hints if key in text), None)
    return text + (f"; {hint}" if hint else "")


if _core is not None:
    _UNANCHORED = _core.RE2.Anchor.UNANCHORED


def _alarm(signum: int, frame: object) -> None:
    raise SlowPattern


def _timed(search: Callable[[str], Any], text: str) -> Any:
    """search(text), stopped after FALLBACK_CALL_S of CPU time by SIGVTALRM (a virtual timer: SIGALRM is
    often someone else's) where this is the main thread and nothing else handles SIGVTALRM; Python's re checks
    for signals as it backtracks."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(
        signal.SIGVTALRM
    ) not in (signal.SIG_DFL, signal.SIG_IGN, None):
        return search(text)
    previous = signal.signal(signal.SIGVTALRM, _alarm)
    try:
        signal.setitimer(signal.ITIMER_VIRTUAL, FALLBACK_CALL_S)
        return search(text)
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


_LIVE: weakref.WeakSet[LineMatcher] = weakref.WeakSet()  # matchers whose thread may still run


@atexit.register
def _stop_threads_at_exit() -> None:
    """Before the interpreter finalizes: stop every matcher and wait for its thread's search in progress (one
    batch or line, bounded by MAX_PROGRAM). A daemon thread still inside RE2 at finalization is ended by
    the runtime while C++ frames are on its stack, and the process aborts ("terminate called without an
    active exception", SIGABRT)."""
    for matcher in list(_LIVE):
        matcher.close()
        if matcher._thread is not None:
            matcher._thread.join()


# What a LineMatcher reports: (pattern index, line number, the line in UTF-8, its leftmost match's groups).
OnMatch = Callable[[int, int, bytes, Groups], None]


class LineMatcher:
    """Lines as they stream, matched against patterns off the caller's thread (see the module docstring).

    Each pattern has a mode: "last" (a metric: only the last line that matches is reported, at the end),
    "first" (a sanity pattern: the first, then no more searching) or "every" (an iteration pattern, while
    `wanted(i)` says so). `add(number, line)` is cheap; `finish()` waits until every line given is matched
    and reported, or the deadline (time.monotonic()) has passed; `error` says why matching stopped early.
    """

    def __init__(
        self,
        patterns: Sequence[tuple[Pattern, Mode]],
        on_match: OnMatch,
        *,
        deadline: float | None = None,
        wanted: Callable[[int], bool] | None = None,
    ) -> None:
        self.patterns = [p for p, _ in patterns]
        self.modes = [m for _, m in patterns]
        self.on_match = on_match
        self.wanted = wanted or (lambda i: True)
        self.deadline = deadline
        self.error: str | None = None
        self.timed_out = False  # the deadline passed before every line was matched
        self._done = [False] * len(self.patterns)  # a "first" pattern that matched
        self._last: dict[int, tuple[int, bytes]] = {}  # a "last" pattern's line so far: (number, text)
        self._lines: list[tuple[int, str]] = []
        self._chars = 0
        self._queue: deque[tuple[list[tuple[int, str]], int]] = deque()
        self._queued = 0
        self._busy = self._closed = self._stop = self._reported = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._inline = _core is None  # the fallback's timer needs the caller's (main) thread

    def add(self, number: int, line: str) -> None:
        if self._stop or not self.patterns:
            return
        self._lines.append((number, line))
        self._chars += len(line) + 1
        if self._chars >= BATCH:
            self._hand_on()

    def finish(self) -> str | None:
        """Match what is left and report the metrics' last lines (until the deadline); returns `error`."""
        if not self.patterns or self._stop:
            return self.error
        self._hand_on()
        if self._inline:
            self._report()
            return self.error
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            if self._thread is None:  # nothing was handed on: no thread to wait for
                self._start()
            while not self._reported and not self._stop:
                left = None if self.deadline is None else self.deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._give_up()
                    break
                self._cond.wait(left)
        return self.error

    def close(self) -> None:
        """Stop: lines not matched yet are dropped and the thread ends."""
        with self._cond:
            self._stop = True
            self._queue.clear()
            self._cond.notify_all()

    def _hand_on(self) -> None:
        lines, chars = self._lines, self._chars
        self._lines, self._chars = [], 0
        if not lines or self._stop:
            return
        if self._inline:
            self._match(Batch(lines))
            return
        with self._cond:
            while self._queued > MAX_BACKLOG and not self._stop:  # the output waits, as at a full pipe
                left = None if self.deadline is None else self.deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._give_up()
                    return
                self._cond.wait(left)
            if self._stop:
                return
            self._queue.append((lines, chars))
            self._queued += chars
            self._cond.notify_all()
            if self._thread is None:
                self._start()

    def _start(self) -> None:  # under self._cond
        self._thread = threading.Thread(target=self._work, name="tailscope-patterns", daemon=True)
        _LIVE.add(self)
        self._thread.start()

    def _give_up(self) -> None:  # under self._cond
        left = self._queued
        self._stop = self.timed_out = True
        self._queue.clear()
        self._cond.notify_all()
        names = ", ".join(repr(p.text) for p in self.patterns)
        self.error = f"not matched within the trial time limit ({names}; {left:,} characters left)"

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                if not self._queue:  # closed, everything matched: the metrics' lines last
                    self._busy = True
                    item = None
                else:
                    item = self._queue.popleft()
                    self._busy = True
            try:
                if item is None:
                    self._report()
                    return
                self._match(Batch(item[0]))
            finally:
                with self._cond:
                    self._busy = False
                    if item is not None:
                        self._queued -= item[1]
                    self._cond.notify_all()

    def _match(self, batch: Batch) -> None:
        """Every pattern over one batch, as its mode says."""
        n = len(batch)
        for i, pattern in enumerate(self.patterns):
            mode = self.modes[i]
            if self._stop:
                return
            try:
                if mode == "last":
                    k = pattern.last(batch, 0, n)
                    if k is not None:
                        self._last[i] = (batch.numbers[k], batch.encoded[k])
                elif mode == "first":
                    for k, groups in [] if self._done[i] else pattern.every(batch, 0, n):
                        self._done[i] = True
                        self.on_match(i, batch.numbers[k], batch.encoded[k], groups)
                        break
                else:
                    wanted, report, numbers, lines = self.wanted, self.on_match, batch.numbers, batch.encoded
                    for k, groups in pattern.every(batch, 0, n):
                        if self._stop or not wanted(i):
                            break
                        report(i, numbers[k], lines[k], groups)
            except SlowPattern:
                self._slow(pattern, batch)
                return

    def _report(self) -> None:
        """The groups of each metric's last line (once, at the end)."""
        try:
            for i, (number, line) in sorted(self._last.items()):
                if self._stop:
                    return
                self._found(i, number, line, self.patterns[i])
        except SlowPattern:
            self._slow(self.patterns[i], None)
        finally:
            with self._cond:
                self._reported = True
                self._cond.notify_all()

    def _found(self, i: int, number: int, line: bytes, pattern: Pattern) -> None:
        groups = pattern.match_line(line)
        if groups is not None and not self._stop:
            self.on_match(i, number, line, groups)

    def _slow(self, pattern: Pattern, batch: Batch | None) -> None:
        self._stop = True
        where = f" in lines {batch.numbers[0]}-{batch.numbers[-1]}" if batch is not None else ""
        self.error = (
            f"the pattern {pattern.text!r} took more than {FALLBACK_CALL_S:g} s of CPU on one line{where} "
            "(this platform has no RE2, and Python's re backtracks; install google-re2)"
        )
