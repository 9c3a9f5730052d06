"""The measurement procedure against simulated and fake counter sources; the hardware source's discovery."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tailscope.addr.addresses import read_samples
from tailscope.addr.detect import slice_pmus
from tailscope.addr.errors import AddrInputError
from tailscope.addr.gf2 import bits_matrix, rank
from tailscope.addr.infer import InferSettings, infer
from tailscope.addr.measure import (
    LINES_PER_PAGE,
    MeasureSettings,
    MeasureUnavailableError,
    PerfChaCounterSource,
    SimulatedCounterSource,
    classify,
    measure,
)
from tailscope.addr.tables import builtin_model


def test_classify_by_hand():
    counts = np.array(
        [
            [0, 990, 5, 5],  # clear: 99% of lookups, 99% of rounds
            [0, 500, 500, 0],  # ambiguous split
            [1, 2, 0, 3],  # counters did not move: below min_fraction * rounds
            [40, 960, 0, 0],  # 96% share, 96% of rounds: accepted at 95%
            [60, 940, 0, 0],  # 94% share: refused
        ]
    )
    slices, share = classify(counts, 1000, 0.95, 0.9)
    assert slices.tolist() == [1, -1, -1, 1, -1]
    assert share[0] == pytest.approx(0.99) and share[2] == pytest.approx(0.5)


def test_simulated_measurement_feeds_inference_and_resumes(tmp_path, rng, seed):
    """Pages below 1 GiB: the inferred model is exact there and refuses addresses above (valid range)."""
    truth = builtin_model("SKX_24")
    out = tmp_path / "map.csv"
    settings = MeasureSettings(pages=14, rounds=300, backoff_s=0.0)
    source = SimulatedCounterSource(truth, seed=seed, memory_bytes=1 << 30, ambiguous=0.02, failed=0.01)
    sleeps: list[float] = []
    summary = measure(source, out, settings, sleep=sleeps.append)
    assert summary.pages_complete == 14 and summary.lines_failed == 0 and source.released
    assert summary.lines_measured == 14 * LINES_PER_PAGE
    assert summary.attempts > summary.lines_measured  # ambiguous and failed readings were retried
    samples = read_samples(out)
    assert samples.addresses.size == 14 * LINES_PER_PAGE
    assert (samples.slices == truth.slices(samples.addresses)).all()  # only clear readings were written
    again = measure(SimulatedCounterSource(truth, seed=seed + 1), out, settings)
    assert again.pages_complete_before == 14 and again.lines_measured == 0  # nothing left to do
    result = infer(samples.addresses, samples.slices, InferSettings(seed=seed, holdout=0))
    frames = np.unique(samples.addresses >> np.uint64(21))
    design = np.hstack([np.ones((frames.size, 1), dtype=bool), bits_matrix(frames, 9)])  # bits 21..29
    if rank(design) == 10:  # 14 random frames of 512 almost always span bits 21..29
        assert result.model.high_bit == 29 and result.undetermined_bits == ()
    else:  # otherwise the inference must say which bits it cannot tell, and stop below them
        assert result.undetermined_bits and result.model.high_bit == result.undetermined_bits[0] - 1
    fresh = rng.integers(0, result.model.valid_limit, 100_000, dtype=np.uint64)
    assert (result.model.slices(fresh) == truth.slices(fresh)).all()
    with pytest.raises(AddrInputError, match="beyond the valid range"):
        result.model.slices(np.array([result.model.valid_limit], dtype=np.uint64))


class Interrupting(SimulatedCounterSource):
    """Stops the run (as Ctrl-C would) after `calls` requests."""

    def __init__(self, *args, stop_after: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stop_after = stop_after

    def lookups(self, page, lines, rounds):
        if self.calls >= self.stop_after:
            raise KeyboardInterrupt
        return super().lookups(page, lines, rounds)


class SamePages(SimulatedCounterSource):
    """Hands out the same pages again (a hugetlb pool reused by the next run)."""

    def __init__(self, *args, pages: list[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fixed = pages

    def allocate_pages(self, count):
        return self.fixed[:count]


def test_an_interrupted_run_keeps_its_lines_and_the_rerun_skips_them(tmp_path, seed):
    truth = builtin_model("SKX_16")
    out = tmp_path / "map.csv"
    settings = MeasureSettings(pages=2, rounds=1000, batch=4096, backoff_s=0.0)
    pages = SimulatedCounterSource(truth, seed=seed).allocate_pages(2)
    first = SamePages(truth, seed=seed, pages=pages, ambiguous=0.0, failed=0.0)
    first.lookups = Interrupting(truth, seed=seed, stop_after=3, ambiguous=0.0, failed=0.0).lookups
    with pytest.raises(KeyboardInterrupt):
        measure(first, out, settings, sleep=lambda s: None)
    assert first.released  # pages are given back on the way out
    assert len(read_samples(out).addresses) == 3 * 4096
    with open(out, "a") as fh:  # a line cut short by the interruption
        fh.write("0x1234")
    second = SamePages(truth, seed=seed, pages=pages, ambiguous=0.0, failed=0.0)
    summary = measure(second, out, settings, sleep=lambda s: None)
    assert summary.lines_skipped == 3 * 4096
    assert summary.lines_measured == 2 * LINES_PER_PAGE - 3 * 4096
    samples = read_samples(out)
    assert np.unique(samples.addresses).size == samples.addresses.size == 2 * LINES_PER_PAGE
    assert summary.pages_complete == 2


class Stubborn(SimulatedCounterSource):
    """Line 7 of every page reads ambiguous three times before it reads clearly."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, ambiguous=0.0, failed=0.0, **kwargs)
        self.tries = 0

    def lookups(self, page, lines, rounds):
        counts = super().lookups(page, lines, rounds)
        hit = np.flatnonzero(lines == 7)
        if hit.size and self.tries < 3:
            self.tries += 1
            counts[hit] = rounds // 2
        return counts


def test_retries_back_off_and_give_up(tmp_path, seed):
    truth = builtin_model("SKX_20")
    sleeps: list[float] = []
    settings = MeasureSettings(pages=1, rounds=1000, batch=64, backoff_s=0.001, backoff_max_s=0.003)
    summary = measure(Stubborn(truth, seed=seed), tmp_path / "a.csv", settings, sleep=sleeps.append)
    assert sleeps == [0.001, 0.002, 0.003]  # doubling, capped
    rows = (tmp_path / "a.csv").read_text().splitlines()
    page = int(rows[1].split(",")[0], 16) & ~((2 << 20) - 1)
    line7 = [r for r in rows[1:] if int(r.split(",")[0], 16) == page + 7 * 64]
    assert len(line7) == 1 and line7[0].split(",")[-1] == "4"  # clear on the 4th attempt
    assert summary.lines_failed == 0
    give_up = MeasureSettings(pages=1, rounds=1000, batch=64, retries=2, backoff_s=0.0)
    summary = measure(Stubborn(truth, seed=seed), tmp_path / "b.csv", give_up, sleep=lambda s: None)
    assert summary.lines_failed == 1 and summary.pages_complete == 0
    assert summary.lines_measured == LINES_PER_PAGE - 1


def _fake_pmu(root: Path, name: str, pmu_type: int, formats: dict[str, str]) -> None:
    d = root / name
    (d / "format").mkdir(parents=True)
    (d / "type").write_text(f"{pmu_type}\n")
    (d / "cpumask").write_text("0,24\n")
    for field, value in formats.items():
        (d / "format" / field).write_text(value + "\n")


def test_no_uncore_pmus_is_a_clear_error(tmp_path):
    (tmp_path / "software").mkdir()
    (tmp_path / "msr").mkdir()
    with pytest.raises(
        MeasureUnavailableError, match=r"no uncore_cha PMUs .*\(it has: msr, software\).*bare-metal"
    ):
        PerfChaCounterSource(tmp_path)


def test_cha_pmus_are_discovered_and_the_missing_helper_is_named(tmp_path):
    for i in (0, 1, 10, 2):
        _fake_pmu(tmp_path, f"uncore_cha_{i}", 40 + i, {"event": "config:0-7", "umask": "config:8-15"})
    _fake_pmu(tmp_path, "uncore_imc_0", 60, {"event": "config:0-7"})
    pmus = slice_pmus(tmp_path)
    assert [p.name for p in pmus] == ["uncore_cha_0", "uncore_cha_1", "uncore_cha_2", "uncore_cha_10"]
    assert pmus[3].type == 50 and pmus[0].cpumask == (0, 24) and pmus[0].formats["umask"] == "config:8-15"
    source = PerfChaCounterSource(tmp_path)
    assert source.n_chas == 4
    with pytest.raises(MeasureUnavailableError, match="addr_chamap"):
        source.allocate_pages(1)


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="dominance"):
        measure(
            SimulatedCounterSource(builtin_model("SKX_16")),
            tmp_path / "x.csv",
            MeasureSettings(dominance=0.3),
        )
