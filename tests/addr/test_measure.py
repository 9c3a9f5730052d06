"""The measurement procedure against simulated and fake counter sources; the hardware source's discovery."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from addr_builders import every_line

from tailscope.addr import kernel
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
from tailscope.addr.tables import builtin_model, builtin_names


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


def frames_in_span(measured: np.ndarray, top_bit: int) -> np.ndarray:
    """For every 2 MiB frame below 2^(top_bit + 1): is it in the affine span of the measured frames (the
    XOR of an odd number of them)? Decided by rank, frame by frame, independently of the inference."""
    width = top_bit + 1 - 21
    design = np.hstack([np.ones((measured.size, 1), dtype=bool), bits_matrix(measured, width)])
    r = rank(design)
    every = np.arange(1 << width, dtype=np.uint64)
    rows = np.hstack([np.ones((every.size, 1), dtype=bool), bits_matrix(every, width)])
    return np.array([rank(np.vstack([design, row])) == r for row in rows], dtype=bool)


def assert_exact_on_the_span_only(result, truth, addresses: np.ndarray, rng: np.random.Generator) -> None:
    """The inferred model maps exactly the addresses whose frame is in the span of the measured frames
    (below the data's top bit), agrees with the truth there, and refuses every other address."""
    model = result.model
    measured = np.unique(addresses >> np.uint64(21))
    top = result.top_data_bit
    assert model.high_bit == top and top == int(addresses.max()).bit_length() - 1
    in_span = frames_in_span(measured, top)
    assert in_span[measured.astype(np.int64)].all()
    if in_span.all():
        assert model.span == () and result.undetermined_bits == () and model.covered_high_bit == top
    else:
        assert model.span and result.undetermined_bits
        assert any("only on the span of the measured frames" in note for note in result.notes)
        assert (model.covered_high_bit is None) == (not in_span[0])
    # fresh addresses anywhere below the range, and fresh addresses in frames of the span
    fresh = rng.integers(0, model.valid_limit, 100_000, dtype=np.uint64)
    span_frames = np.flatnonzero(in_span).astype(np.uint64)
    on_span = (rng.choice(span_frames, 100_000) << np.uint64(21)) + rng.integers(
        0, 1 << 21, 100_000, dtype=np.uint64
    )
    for sample in (fresh, on_span):
        covered = model.covers(sample)
        assert (covered == in_span[(sample >> np.uint64(21)).astype(np.int64)]).all()
        assert (model.slices(sample[covered]) == truth.slices(sample[covered])).all()
        if not covered.all():
            with pytest.raises(AddrInputError, match="outside the span"):
                model.slices(sample[~covered][:1])
    with pytest.raises(AddrInputError, match="beyond the valid range"):
        model.slices(np.array([model.valid_limit], dtype=np.uint64))
    tables = model.covered_model()  # what `addr infer -o` writes: a whole range, no conditions
    if tables is not None:
        low = rng.integers(0, tables.valid_limit, 50_000, dtype=np.uint64)
        assert tables.span == () and (tables.slices(low) == truth.slices(low)).all()


def measure_and_infer(truth, tmp_path: Path, seed: int, pages: int = 14):
    out = tmp_path / f"map-{truth.name}-{seed}.csv"
    settings = MeasureSettings(pages=pages, rounds=300, backoff_s=0.0)
    source = SimulatedCounterSource(truth, seed=seed, memory_bytes=1 << 30, ambiguous=0.02, failed=0.01)
    summary = measure(source, out, settings, sleep=lambda s: None)
    samples = read_samples(out)
    result = infer(samples.addresses, samples.slices, InferSettings(seed=seed, holdout=0))
    return out, settings, source, summary, samples, result


def test_simulated_measurement_feeds_inference_and_resumes(tmp_path, rng, seed):
    """14 frames below 1 GiB: the inferred model is exact on the span of the measured frames (almost always
    every frame below 1 GiB; for some seeds not, and then not frame 0 either) and refuses everything else."""
    truth = builtin_model("SKX_24")
    out, settings, source, summary, samples, result = measure_and_infer(truth, tmp_path, seed)
    assert summary.pages_complete == 14 and summary.lines_failed == 0 and source.released
    assert summary.lines_measured == 14 * LINES_PER_PAGE
    assert summary.attempts > summary.lines_measured  # ambiguous and failed readings were retried
    assert samples.addresses.size == 14 * LINES_PER_PAGE
    assert (samples.slices == truth.slices(samples.addresses)).all()  # only clear readings were written
    again = measure(SimulatedCounterSource(truth, seed=seed + 1), out, settings)
    assert again.pages_complete_before == 14 and again.lines_measured == 0  # nothing left to do
    assert_exact_on_the_span_only(result, truth, samples.addresses, rng)


def test_frames_missing_frame_zero_from_their_span_are_not_claimed_below_2_mib(rng, seed):
    """Frames whose span misses frame 0 (here: bit 21 XOR bit 22 is 1 in all of them): the base sequence
    (slices from address 0) is not determined, so nothing below 2 MiB is mapped and no table is written."""
    truth = builtin_model("SKX_24")
    frames = rng.choice(1 << 9, size=40, replace=False).astype(np.uint64)
    frames = frames ^ ((frames ^ (frames >> np.uint64(1)) ^ np.uint64(1)) & np.uint64(1))  # bit 0 != bit 1
    addresses = every_line(np.unique(frames) << np.uint64(21))
    result = infer(addresses, truth.slices(addresses), InferSettings(seed=seed, holdout=0))
    assert result.model.covered_high_bit is None and result.model.covered_model() is None
    assert result.undetermined_bits[:2] == (21, 22)
    assert any("frame at address 0 is outside that span" in note for note in result.notes)
    with pytest.raises(AddrInputError, match="outside the span"):
        result.model.slices(rng.integers(0, 1 << 21, 10, dtype=np.uint64))
    assert_exact_on_the_span_only(result, truth, addresses, rng)


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_names())
def test_inference_claims_only_the_span_over_many_seeds(name, seed):
    """Frames drawn as the measurement draws them (14 of the 512 below 1 GiB; 8 to 14 for more partial
    spans), over consecutive seeds per shared table (McCalpin's, the built-in copies of
    ../shared/data/slicehash): never a claim the data do not back. 30 seeds for SKX_24 (where seed 1 showed
    the fault), 4 for the others."""
    truth = builtin_model(name)
    runs = 30 if name.startswith("SKX_24") else 4
    partial = 0
    for k in range(runs):
        s = (seed + 1000 * builtin_names().index(name) + k) % (1 << 32)
        rng = np.random.default_rng(s)
        pages = 14 if k % 2 == 0 else int(rng.integers(8, 15))
        frames = SimulatedCounterSource(truth, seed=s, memory_bytes=1 << 30).allocate_pages(pages)
        addresses = every_line(np.array(frames, dtype=np.uint64))
        result = infer(addresses, truth.slices(addresses), InferSettings(seed=s, holdout=0))
        try:
            assert_exact_on_the_span_only(result, truth, addresses, rng)
        except AssertionError as exc:
            raise AssertionError(f"{name}, seed {s}, {pages} frames: {exc}") from exc
        partial += bool(result.model.span)
    print(f"{name}: {partial} of {runs} runs with a partial span")


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


FIXTURE_SYSFS = Path(__file__).resolve().parents[1] / "counters" / "fixtures" / "sysfs-skx-2s"

STAND_IN = '''#!{python}
"""Stand-in for addr_chamap where no CHA PMU exists: the same protocol, counts from a simulated {model}."""
import json, sys
sys.path[:0] = {path!r}
import numpy as np
from tailscope.addr.measure import SimulatedCounterSource
from tailscope.addr.tables import builtin_model

args = sys.argv[1:]
open({argv_file!r}, "w").write(json.dumps(args))
pages = int(args[args.index("--pages") + 1])
source = SimulatedCounterSource(builtin_model({model!r}), seed={seed})
frames = source.allocate_pages(pages)
print(json.dumps({{"record": "ready", "chas": source.n_chas, "pages": [hex(p) for p in frames]}}), flush=True)
for request in sys.stdin:
    if request.startswith("quit"):
        break
    _, page, rounds, *lines = request.split()
    counts = source.lookups(int(page), np.array(lines, dtype=np.int64), int(rounds))
    sys.stdout.write("".join(" ".join(map(str, row)) + "\\n" for row in counts.tolist()))
    sys.stdout.flush()
'''


def test_the_helper_protocol_end_to_end_with_a_stand_in_helper(tmp_path, monkeypatch, seed):
    """PerfChaCounterSource -> open_cha_helper -> the helper process protocol -> measure -> map file, with a
    stand-in executable that answers like addr_chamap from a simulated 16-CHA part (no PMU exists here)."""
    import sys

    truth = builtin_model("SKX_16")
    for i in range(16):
        _fake_pmu(tmp_path / "sys/bus/event_source/devices", f"uncore_cha_{i}", 40 + i, {
            "event": "config:0-7", "umask": "config:8-15", "filter_state5": "config1:17-26"
        })  # fmt: skip
    bindir = tmp_path / "bin"
    bindir.mkdir()
    helper = bindir / "addr_chamap"
    helper.write_text(
        STAND_IN.format(
            python=sys.executable, path=sys.path, model="SKX_16", seed=seed, argv_file=str(tmp_path / "argv")
        )
    )
    helper.chmod(0o755)
    # the stand-in maps with the real kernel library: keep it findable when the executables move to bindir
    monkeypatch.setenv("TAILSCOPE_NATIVE_LIB_DIR", str(kernel.library_path().parent))
    monkeypatch.setenv("TAILSCOPE_NATIVE_DIR", str(bindir))
    source = PerfChaCounterSource(tmp_path / "sys/bus/event_source/devices")
    out = tmp_path / "map.csv"
    summary = measure(source, out, MeasureSettings(pages=1, rounds=200, backoff_s=0.0), sleep=lambda s: None)
    assert summary.pages_complete == 1 and summary.lines_failed == 0
    samples = read_samples(out)
    assert samples.addresses.size == LINES_PER_PAGE
    assert (samples.slices == truth.slices(samples.addresses)).all()
    argv = json.loads((tmp_path / "argv").read_text())
    assert (
        argv[:2] == ["--pages", "1"]
        and "--sysfs" in argv
        and argv[argv.index("--sysfs") + 1] == str(tmp_path / "sys")
    )
    assert argv[argv.index("--event") + 1] == "uncore_cha/event=0x34,umask=0x3,filter_state5=0xf1/"


def test_the_real_helper_explains_why_it_cannot_measure_here(tmp_path):
    """The built addr_chamap: on this machine's sysfs (no uncore_cha PMUs) and on an SKX fixture tree whose
    CHA PMU types the kernel does not have, it exits 3 with a one-line reason that measure passes on."""
    from tailscope.native import NativeMissingError, native_path

    try:
        exe = native_path("addr_chamap")
    except NativeMissingError:
        pytest.skip("addr_chamap is not built (TAILSCOPE_NATIVE_DIR without it)")
    if slice_pmus():
        pytest.skip("this machine has uncore CHA PMUs: the helper would measure")
    done = subprocess.run([str(exe), "--pages", "1"], capture_output=True, text=True, check=False)
    assert done.returncode == 3 and done.stderr.startswith(
        "addr_chamap: error: no uncore_cha PMUs under /sys"
    )
    assert "not in a VM" in done.stderr
    done = subprocess.run([str(exe)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--pages is required" in done.stderr
    source = PerfChaCounterSource(FIXTURE_SYSFS / "bus/event_source/devices")
    assert source.n_chas > 1
    with pytest.raises(MeasureUnavailableError, match=r"addr_chamap did not start: .*uncore_cha"):
        source.allocate_pages(1)
