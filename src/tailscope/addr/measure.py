"""Measure which CHA each cache line belongs to (McCalpin's procedure), writing maps `infer` consumes.

For every cache line of some 2 MiB pages (physical addresses from /proc/self/pagemap): read the
LLC_LOOKUP counter of every CHA, load and flush the line `rounds` times, read them again. The line belongs
to the CHA that saw the lookups when one CHA clearly dominates: at least `dominance` (95%) of all lookups
counted and at least `min_fraction` of the rounds. Otherwise the line is tried again, after a back-off that
doubles from `backoff_s` up to `backoff_max_s` (other activity on the node is the usual cause), up to
`retries` times. McCalpin: ~1000 rounds per line, ~6 s per 2 MiB page; a few dozen pages determine a model.

The hardware is reached through a `CounterSource`. `PerfChaCounterSource` discovers the uncore_cha PMUs in
sysfs and drives a native helper through one seam (`open_cha_helper`); `SimulatedCounterSource` stands in
for hardware with a known model, noise and occasional ambiguous or failed readings (tests, dry runs).

Output: a CSV `address,slice,share,rounds,attempts` appended line by line (flushed and fsynced per batch),
so an interrupted run keeps what it measured and a rerun skips every line already in the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, Protocol

import numpy as np

from tailscope.addr.addresses import read_samples
from tailscope.addr.detect import EVENT_SOURCE, UncorePmu, event_sources, slice_pmus
from tailscope.addr.errors import AddrInputError
from tailscope.addr.model import LINE_BITS, SliceHashModel
from tailscope.native import NativeMissingError, native_path

PAGE_BYTES = 2 << 20
LINES_PER_PAGE = PAGE_BYTES >> LINE_BITS
CSV_HEADER = "address,slice,share,rounds,attempts\n"

# LLC_LOOKUP.DATA_READ on SKX/CLX CHAs (seed notes): event 0x34, umask 0x03, CHA FILTER0 0x01e20000
# (every LLC state). Under perf: uncore_cha_N/event=0x34,umask=0x3,filter_state=.../ (format/ tells).
CHA_LOOKUP_EVENT = {"event": 0x34, "umask": 0x03}
CHA_LOOKUP_FILTER0 = 0x01E20000
HELPER = "addr_chamap"


class MeasureUnavailableError(AddrInputError):
    """This node cannot measure slices (no uncore PMUs, no helper); the message says what is missing."""


class CounterSource(Protocol):
    """Where lookups are counted: a node's CHA PMUs or a simulation."""

    @property
    def n_chas(self) -> int: ...

    def allocate_pages(self, count: int) -> list[int]:
        """Allocate (and keep) `count` 2 MiB pages; their physical base addresses."""
        ...

    def lookups(self, page: int, lines: np.ndarray, rounds: int) -> np.ndarray:
        """For each line index (0..32767) of the page at physical address `page`: the lookup counts of
        every CHA over `rounds` load+flush rounds; shape (len(lines), n_chas)."""
        ...

    def release(self) -> None: ...


@dataclass(frozen=True)
class MeasureSettings:
    pages: int = 32  # 2 MiB pages the map file should hold completely
    rounds: int = 1000
    dominance: float = 0.95  # the winning CHA's share of all lookups counted
    min_fraction: float = 0.9  # the winning CHA's lookups / rounds
    retries: int = 100
    backoff_s: float = 0.001
    backoff_max_s: float = 0.1
    batch: int = 1024  # lines per request to the source (and per flush of the CSV)

    def check(self) -> None:
        if self.pages < 1 or self.rounds < 1 or self.retries < 0 or self.batch < 1:
            raise AddrInputError("measure: --pages, --rounds and the batch must be >= 1, --retries >= 0")
        if not 0.5 < self.dominance <= 1 or not 0 < self.min_fraction <= 1:
            raise AddrInputError("measure: --dominance must be in (0.5, 1] and --min-fraction in (0, 1]")


@dataclass
class MeasureSummary:
    output: Path
    pages_complete_before: int
    pages_complete: int
    pages_measured: list[int] = field(default_factory=list)  # physical addresses worked on in this run
    lines_measured: int = 0
    lines_skipped: int = 0  # already in the file
    lines_failed: int = 0  # no dominant CHA after every retry (not written: a rerun tries again)
    attempts: int = 0
    sleeps_s: float = 0.0


def classify(
    counts: np.ndarray, rounds: int, dominance: float, min_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """(slice, share) of each line's counts; slice -1 where no CHA dominates clearly."""
    c = np.asarray(counts, dtype=np.float64)
    winner = np.argmax(c, axis=1)
    top = c[np.arange(c.shape[0]), winner]
    total = c.sum(axis=1)
    share = np.divide(top, total, out=np.zeros_like(top), where=total > 0)
    ok = (share >= dominance) & (top >= min_fraction * rounds)
    return np.where(ok, winner, -1), share


def measured_lines(path: Path) -> np.ndarray:
    """Line addresses already in a map file (empty when the file does not exist). A final line cut off
    by an interrupted run (no newline) is removed first, so appending continues a well-formed file."""
    if not path.exists():
        return np.zeros(0, dtype=np.uint64)
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as fh:
            fh.truncate(data.rfind(b"\n") + 1)
    if not path.read_bytes().strip():
        return np.zeros(0, dtype=np.uint64)
    samples = read_samples(path)
    return np.unique(samples.addresses >> np.uint64(LINE_BITS) << np.uint64(LINE_BITS))


def complete_pages(lines: np.ndarray) -> np.ndarray:
    frames, counts = np.unique(lines >> np.uint64(21), return_counts=True)
    return frames[counts >= LINES_PER_PAGE] << np.uint64(21)


def measure(
    source: CounterSource,
    output: Path,
    settings: MeasureSettings,
    *,
    progress: Callable[[str], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MeasureSummary:
    """Measure until `output` holds settings.pages complete pages (resuming what it already holds)."""
    settings.check()
    output = Path(output)
    done = measured_lines(output)
    complete = complete_pages(done)
    summary = MeasureSummary(output, int(complete.size), int(complete.size))
    wanted = settings.pages - int(complete.size)
    if wanted <= 0:
        return summary
    if not output.exists() or output.stat().st_size == 0:
        output.write_text(CSV_HEADER)
    pages = source.allocate_pages(wanted)
    try:
        with open(output, "a") as fh:
            for page in pages:
                summary.pages_measured.append(page)
                addresses = np.uint64(page) + (
                    np.arange(LINES_PER_PAGE, dtype=np.uint64) << np.uint64(LINE_BITS)
                )
                todo = np.flatnonzero(~np.isin(addresses, done))
                summary.lines_skipped += LINES_PER_PAGE - todo.size
                for start in range(0, todo.size, settings.batch):
                    _measure_batch(
                        source, page, todo[start : start + settings.batch], settings, fh, summary, sleep
                    )
                if progress:
                    progress(
                        f"page 0x{page:x}: {summary.lines_measured} lines measured, "
                        f"{summary.lines_failed} failed"
                    )
    finally:
        source.release()
    summary.pages_complete = int(complete_pages(measured_lines(output)).size)
    return summary


def _measure_batch(
    source: CounterSource,
    page: int,
    lines: np.ndarray,
    settings: MeasureSettings,
    fh: object,
    summary: MeasureSummary,
    sleep: Callable[[float], None],
) -> None:
    pending = lines
    attempt = 0
    while pending.size and attempt <= settings.retries:
        if attempt:
            pause = min(settings.backoff_s * 2 ** (attempt - 1), settings.backoff_max_s)
            sleep(pause)
            summary.sleeps_s += pause
        attempt += 1
        summary.attempts += int(pending.size)
        counts = source.lookups(page, pending, settings.rounds)
        slices, share = classify(counts, settings.rounds, settings.dominance, settings.min_fraction)
        ok = slices >= 0
        rows = [
            f"0x{page + (line << LINE_BITS):x},{s},{sh:.4f},{settings.rounds},{attempt}\n"
            for line, s, sh in zip(pending[ok].tolist(), slices[ok].tolist(), share[ok].tolist(), strict=True)
        ]
        # written as soon as read: an interrupted run keeps every line it settled
        fh.write("".join(rows))  # type: ignore[attr-defined]
        fh.flush()  # type: ignore[attr-defined]
        os.fsync(fh.fileno())  # type: ignore[attr-defined]
        summary.lines_measured += len(rows)
        pending = pending[~ok]
    summary.lines_failed += int(pending.size)


# --- a simulated node ---------------------------------------------------------------------------------
class SimulatedCounterSource:
    """A node whose slices follow `model`, with background lookups on every CHA (`background` per CHA
    and round: other activity during the reading), a small leak of each line's lookups to other CHAs, and
    per reading a chance of an ambiguous split between two CHAs or of a failed reading (counters that did
    not move)."""

    def __init__(
        self,
        model: SliceHashModel,
        *,
        seed: int | None = None,
        background: float = 0.0005,
        leak: float = 0.01,
        ambiguous: float = 0.01,
        failed: float = 0.005,
        memory_bytes: int | None = None,
    ) -> None:
        self.model = model
        self.rng = np.random.default_rng(seed)
        self.background = background
        self.leak = leak
        self.ambiguous = ambiguous
        self.failed = failed
        self.limit = min(model.valid_limit, memory_bytes or model.valid_limit)
        self.calls = 0
        self.released = False

    @property
    def n_chas(self) -> int:
        return self.model.n_slices

    def allocate_pages(self, count: int) -> list[int]:
        frames = self.rng.choice(self.limit // PAGE_BYTES, size=count, replace=False)
        return [int(f) * PAGE_BYTES for f in frames]

    def lookups(self, page: int, lines: np.ndarray, rounds: int) -> np.ndarray:
        self.calls += 1
        n = self.n_chas
        addresses = np.uint64(page) + (np.asarray(lines, dtype=np.uint64) << np.uint64(LINE_BITS))
        truth = self.model.slices(addresses).astype(np.int64)
        counts = self.rng.poisson(self.background * rounds, size=(truth.size, n)).astype(np.int64)
        own = self.rng.binomial(rounds, 1.0 - self.leak, size=truth.size)
        counts[np.arange(truth.size), truth] += own
        spill = self.rng.integers(0, n, size=truth.size)
        np.add.at(counts, (np.arange(truth.size), spill), rounds - own)
        draw = self.rng.random(truth.size)
        split = draw < self.ambiguous
        if split.any():
            other = (
                (truth[split] + self.rng.integers(1, n, size=int(split.sum()))) % n if n > 1 else truth[split]
            )
            half = counts[split, truth[split]] // 2
            counts[split, truth[split]] -= half
            counts[np.flatnonzero(split), other] += half
        dead = (draw >= self.ambiguous) & (draw < self.ambiguous + self.failed)
        counts[dead] = self.rng.poisson(self.background * rounds, size=(int(dead.sum()), n))
        return counts

    def release(self) -> None:
        self.released = True


# --- the hardware -------------------------------------------------------------------------------------
class ChaHelper(Protocol):
    """What the native helper provides once started: pages it holds and lookup counts per line."""

    pages: list[int]

    def lookups(self, page: int, lines: np.ndarray, rounds: int) -> np.ndarray: ...

    def close(self) -> None: ...


def lookup_event(pmu: UncorePmu) -> str:
    """The perf event string of LLC_LOOKUP.DATA_READ for this CHA PMU: event and umask, plus the SKX/CLX
    FILTER0 state bits (config1:17-26, `filter_state5` in format/) where the PMU has that field."""
    spec = f"uncore_cha/event=0x{CHA_LOOKUP_EVENT['event']:x},umask=0x{CHA_LOOKUP_EVENT['umask']:x}"
    if "filter_state5" in pmu.formats:
        spec += f",filter_state5=0x{CHA_LOOKUP_FILTER0 >> 17:x}"
    return spec + "/"


def open_cha_helper(pmus: Sequence[UncorePmu], pages: int, root: Path = EVENT_SOURCE) -> ChaHelper:
    """THE seam to the native helper `addr_chamap` (native/addr/addr_chamap.c, on the project's perf_event
    counter library): it allocates `pages` 2 MiB hugetlb pages, resolves their physical addresses through
    /proc/self/pagemap (root), opens LLC_LOOKUP (`lookup_event`) on every uncore_cha unit of socket 0, and
    answers `lookups` requests with per-CHA count deltas over `rounds` x (load; mfence; clflush). A helper
    that cannot start (no PMU it can open, no huge pages, no root) raises MeasureUnavailableError with its
    own one-line reason."""
    try:
        exe = native_path(HELPER)
    except NativeMissingError as exc:
        raise MeasureUnavailableError(f"the CHA measurement helper is missing: {exc}") from None
    argv = [str(exe), "--pages", str(pages), "--event", lookup_event(pmus[0])]
    if Path(root) != EVENT_SOURCE:  # a sysfs tree elsewhere (tests): <root>/bus/event_source/devices
        argv += ["--sysfs", str(Path(root).parents[2])]
    return NativeChaHelper(argv, len(pmus))


class NativeChaHelper:
    """A running `addr_chamap`: a `ready` JSON line, then one `lookups` request per batch on stdin and one
    line of K counts per cache line on stdout."""

    def __init__(self, argv: list[str], n_chas: int) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        first = self.proc.stdout.readline() if self.proc.stdout else ""
        if not first:
            self._fail("did not start")
        try:
            ready = json.loads(first)
        except json.JSONDecodeError:
            self._fail(f"answered {first[:80]!r} instead of its ready record")
        if ready.get("record") != "ready" or int(ready.get("chas", -1)) != n_chas:
            self._fail(
                f"opened {ready.get('chas')} CHA counters, expected {n_chas} (one per uncore_cha unit)"
            )
        self.n_chas = n_chas
        self.pages = [int(p, 16) for p in ready["pages"]]

    def _fail(self, what: str) -> NoReturn:
        if self.proc.poll() is None:
            self.proc.kill()
        _, err = self.proc.communicate()
        reason = (err or "").strip().splitlines()
        raise MeasureUnavailableError(
            f"{HELPER} {what}" + (f": {reason[-1]}" if reason else f" (exit code {self.proc.returncode})")
        )

    def lookups(self, page: int, lines: np.ndarray, rounds: int) -> np.ndarray:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        wanted = [int(x) for x in np.asarray(lines).tolist()]
        try:
            self.proc.stdin.write(f"lookups {page} {rounds} {' '.join(map(str, wanted))}\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._fail("stopped")
        rows = [self.proc.stdout.readline() for _ in wanted]
        if any(not r for r in rows):
            self._fail("stopped answering")
        counts = np.array([r.split() for r in rows], dtype=np.int64).reshape(len(wanted), self.n_chas)
        return counts

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class PerfChaCounterSource:
    """Lookups counted by the node's uncore_cha PMUs (perf_event_open, through the native helper)."""

    def __init__(self, root: Path = EVENT_SOURCE) -> None:
        self.pmus = [p for p in slice_pmus(root) if p.name.startswith("uncore_cha_")]
        if not self.pmus:
            present = ", ".join(event_sources(root)) or "nothing"
            raise MeasureUnavailableError(
                f"no uncore_cha PMUs in {root} (it has: {present}). Measuring slices needs a bare-metal "
                "Intel Xeon with CHAs (Skylake-SP or later) whose kernel exposes uncore PMUs, run as root "
                "(pagemap frame numbers, system-wide uncore counting; or perf_event_paranoid <= 0). "
                "In a VM the PMUs are absent, and guest-physical addresses do not determine host slices "
                "anyway"
            )
        missing = [f for f in ("event", "umask") if f not in self.pmus[0].formats]
        if missing:
            raise MeasureUnavailableError(
                f"{root}/{self.pmus[0].name}/format lacks {', '.join(missing)}: not a CHA PMU this "
                "procedure knows how to program"
            )
        self.root = Path(root)
        self._helper: ChaHelper | None = None

    @property
    def n_chas(self) -> int:
        return len(self.pmus)

    def allocate_pages(self, count: int) -> list[int]:
        self._helper = open_cha_helper(self.pmus, count, self.root)
        return list(self._helper.pages)

    def lookups(self, page: int, lines: np.ndarray, rounds: int) -> np.ndarray:
        if self._helper is None:
            raise RuntimeError("allocate_pages first")
        return self._helper.lookups(page, lines, rounds)

    def release(self) -> None:
        if self._helper is not None:
            self._helper.close()
            self._helper = None
