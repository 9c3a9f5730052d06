"""The effective clock (native/common/ts_clock.c): the per-trial reading is stable, judged against long
reference readings taken in the same test, and `tsclock` prints the same quantity."""

from __future__ import annotations

import json
import os
import statistics
import subprocess

from tailscope.analysis.causes import frequency
from tailscope.evidence import clock
from tailscope.native import native_path

REFERENCE_CHUNKS = 101  # ~7 ms per reading: the control
SHORT = 20  # per-trial readings (the collector's defaults: clock.CHUNKS chunks of clock.ADDS adds)


def test_per_trial_clock_is_stable_against_long_reference_readings():
    cpu = sorted(os.sched_getaffinity(0))[0]
    refs, short, avail = [], [], []
    for _ in range(SHORT):  # a reference before every reading: the clock's own movement is the control
        refs.append(clock.measure([cpu], chunks=REFERENCE_CHUNKS)[0].effective_hz)
        reading = clock.measure([cpu])[0]
        short.append(reading.effective_hz)
        avail.append(reading.available_fraction)
    refs.append(clock.measure([cpu], chunks=REFERENCE_CHUNKS)[0].effective_hz)
    ref = statistics.median(refs)
    # the control: how much the clock itself moved during the test (turbo on a shared host moves it ~1%);
    # never tighter than 0.2%, the chunk-timing resolution of a 70 us chunk on a VM clock
    # (the references' p10-p90 spread, at least 0.2%); and never tighter than the smallest clock drop the
    # frequency cause reads (a reading closer than that to the usual clock cannot mislead it). Five reference
    # readings can agree to 0.2% while a busy 2-core guest moves the 9-chunk readings by 0.6-1% (one CI run:
    # 16 of 20 within 0.6%). On the Sapphire-Rapids-class guest the clock itself moves by 1-3% within tens of
    # ms (a 9-chunk reading bracketed by two 101-chunk ones fell up to 2.6% outside them; the p10-p90 of 21
    # references spanned 1-5.8% on the idle guest): with a reference only every 4th reading, five references
    # agreed to 0.33% while the readings followed the clock over +-1.7% (one CI run: 10 of 20 outside 1%). A
    # reference before every reading measures that movement; a reading dragged down by preempted chunks (a
    # plain median at availability 0.5) would still fall far outside it.
    deciles = statistics.quantiles(refs, n=10)  # p10-p90, not max-min: one reference may catch a clock dip
    drift = max((deciles[-1] - deciles[0]) / ref, 0.002)
    tol = max(3 * drift, frequency.MIN_DROP)
    assert abs(statistics.median(short) - ref) / ref <= tol, (short, refs)
    # disturbed chunks (availability < 1) must not drag a reading down: 90% of the readings within tolerance
    within = [abs(h - ref) / ref <= tol for h in short]
    assert sum(within) >= 0.9 * SHORT, (tol, [round((h - ref) / ref, 4) for h in short], avail)
    assert all(0.0 < a <= 1.0 for a in avail)


def test_all_cpus_at_once_and_a_cpu_outside_the_affinity_is_left_out():
    cpus = sorted(os.sched_getaffinity(0))
    readings = clock.measure(cpus)
    assert [r.cpu for r in readings] == cpus
    assert all(1e8 < r.effective_hz < 1e10 for r in readings)
    # a CPU id the kernel does not have cannot be pinned: no reading, never a zero
    assert clock.measure([4095]) == []
    assert os.sched_getaffinity(0) == set(cpus)  # the caller's affinity is restored


def test_tsclock_prints_json_lines_and_rejects_bad_options():
    exe = str(native_path("tsclock"))
    out = subprocess.run([exe, "--cpus", "0", "--repeat", "2"], capture_output=True, text=True, check=True)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [(x["repeat"], x["cpu"]) for x in lines] == [(0, 0), (1, 0)]
    assert all(100 < x["effective_mhz"] < 10000 and 0 < x["available_fraction"] <= 1 for x in lines)
    bad = subprocess.run([exe, "--cpus", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("tsclock: --cpus x:")
    missing = subprocess.run([exe, "--cpus", "4095"], capture_output=True, text=True)
    assert missing.returncode == 3 and "CPU 4095" in missing.stderr
