"""The note that says when the slow threshold sits inside the run-to-run noise (analysis/notes.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tailscope.analysis import analyze
from tailscope.analysis.model import Settings
from tailscope.analysis.robust import MAD_TO_SD, noise_floor, robust_cv
from tailscope.store.schema import ITERATIONS


def _notes(build, spread: float, seed: int) -> tuple[str, ...]:
    rng = np.random.default_rng(seed)
    values = 100.0 * np.exp(rng.normal(0.0, spread, 40))
    runs = build.runs_frame([build.run_row("n1", t, float(v)) for t, v in enumerate(values)])
    iterations = pd.DataFrame(columns=ITERATIONS.names)
    return analyze(runs, iterations, Settings(), "c1").notes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_noisy_node_is_told_its_threshold_counts_noise(build, seed):
    (note,) = [n for n in _notes(build, 0.04, seed) if "to stand out of the noise" in n]
    assert note.startswith("node n1, l2sum-1a2b: runs here vary by ")
    assert "at the 5% threshold the slow-run count includes ordinary noise" in note
    suggested = float(note.split("--threshold ")[1].split()[0])
    assert 0.05 < suggested < 0.25  # 3 robust CVs of a 4% lognormal spread, sampled from 40 runs
    floor_pct = float(note.split("must be about ")[1].split("%")[0])
    assert floor_pct <= 100 * suggested < floor_pct + 1  # the floor, rounded up to a whole percent


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_quiet_node_gets_no_such_note(build, seed):
    assert not [n for n in _notes(build, 0.004, seed) if "to stand out of the noise" in n]


def test_floor_is_three_robust_cvs():
    assert robust_cv(2.0, 100.0) == pytest.approx(MAD_TO_SD * 0.02)
    assert noise_floor(2.0, 100.0) == pytest.approx(3 * MAD_TO_SD * 0.02)
