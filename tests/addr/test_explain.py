"""`addr explain` on synthetic campaigns: a planted address dependence is found, random slowness is not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from addr_builders import random_pages, write_campaign

from tailscope.addr.explain import ExplainSettings, explain, render, run_lines
from tailscope.addr.snoop import SnoopFilterModel, estimate
from tailscope.addr.tables import builtin_model

LIMIT = 1 << 38
PLANTED = (23, 29)


def parity(pa: int, bits: tuple[int, ...]) -> int:
    return sum((pa >> b) & 1 for b in bits) % 2


def campaign_trials(rng, slow_of, trials=300, pages=4, nodes=("n1", "n2")):
    out = []
    for i in range(trials):
        node = nodes[i % len(nodes)]
        pa = random_pages(rng, pages, LIMIT)
        value = (85.0 if slow_of(pa) else 100.0) + rng.normal(0, 0.3)
        out.append((node, value, pa, None))
    return out


def test_a_planted_parity_is_found_with_its_p_value(tmp_path, rng, seed):
    """Slow iff the parity of bits 23 and 29 is odd on both pages of a trial (a quarter of the trials)."""
    trials = campaign_trials(rng, lambda pa: all(parity(int(p), PLANTED) for p in pa), pages=2)
    write_campaign(tmp_path / "c", trials)
    settings = ExplainSettings(permutations=1999, alpha=0.001, seed=seed)
    result = explain(tmp_path / "c", None, settings=settings)
    (v,) = result.variants
    assert v.trials == 300 and v.trials_with_pages == 300
    assert 40 < v.slow < 110
    assert v.frame_bits is not None and v.frame_bits[0] == 21
    assert v.findings and v.findings[0].bits == PLANTED
    top = v.findings[0]
    assert top.p_adjusted == pytest.approx(1 / 2000)
    # odd on every page of a slow trial; on a third of the normal trials' pages (by hand: 0.5 * 0.5 / 0.75)
    assert top.odd_fraction_slow == 1.0
    assert top.odd_fraction_normal == pytest.approx(1 / 3, abs=0.1)
    assert all(f.bits == PLANTED or f.p_adjusted <= 0.001 for f in v.findings)
    text = render(result)
    assert "FOUND parity of bits 23^29" in text and "adjusted p = 0.0005" in text
    assert "no slice-hash model" in text


def test_random_slowness_reports_nothing(tmp_path, rng, seed):
    """Slow trials drawn at random (10%): no parity may pass the max-statistic test at alpha = 0.001
    (a false finding has probability 0.001 by construction)."""
    trials = campaign_trials(rng, lambda pa: rng.random() < 0.1)
    write_campaign(tmp_path / "c", trials)
    settings = ExplainSettings(permutations=1999, alpha=0.001, seed=seed)
    (v,) = explain(tmp_path / "c", None, settings=settings).variants
    assert v.slow >= 3
    assert v.findings == ()
    assert v.best is not None and v.best.p_adjusted > 0.001
    assert "no address-bit parity separates" in render(explain(tmp_path / "c", None, settings=settings))


L2SUM_CONFIG = json.dumps(
    {"offset": 0, "params": {"data_bytes": 24 * 950_000 // 64 * 64, "chunk_bytes_per_thread": [950_000] * 24}}
)


def test_run_lines_follow_the_probe_config():
    import pandas as pd

    pages = pd.DataFrame(
        {
            "array": "data",
            "thread": [0, 1],
            "virtual_address": [0x7F0000000000, 0x7F0000200000],
            "physical_address": np.array([0x40000000, 0x80000000], dtype=np.uint64),
            "page_size": 2 << 20,
        }
    )
    config = json.dumps(
        {"offset": 128, "params": {"data_bytes": 3 << 20, "chunk_bytes_per_thread": [1 << 20] * 3}}
    )
    lines, threads = run_lines(pages, config)
    assert lines.size == (3 << 20) // 64
    assert int(lines[0]) == 0x40000000 + 128 and int(lines[-1]) == 0x80000000 + 128 + (1 << 20) - 64
    assert np.bincount(threads).tolist() == [16384, 16384, 16384]
    plain, owners = run_lines(pages, None)
    assert plain.size == 2 * 32768 and owners.tolist() == [0] * 32768 + [1] * 32768


def test_predicted_conflict_ranks_and_separates_page_sets(tmp_path, rng, seed):
    """Slowness planted where the snoop-filter model predicts evictions: the conflict test finds it."""
    model = builtin_model("SKX_24")
    sf = SnoopFilterModel()
    import pandas as pd

    pages, conflicts = [], []
    for _ in range(60):
        pa = random_pages(rng, 11, LIMIT)
        frame = pd.DataFrame(
            {
                "array": "data",
                "thread": 0,
                "virtual_address": 0x7F0000000000 + np.arange(11) * (2 << 20),
                "physical_address": pa,
                "page_size": 2 << 20,
            }
        )
        lines, threads = run_lines(frame, L2SUM_CONFIG)
        pages.append(pa)
        conflicts.append(estimate(model, sf, lines, threads).predicted_eviction)
    # the most conflicted fifth is slow (a minority, so the node medians stay normal)
    cut = max(np.quantile(conflicts, 0.8), 1e-9)
    trials = [
        (("n1", "n2")[i % 2], (80.0 if c > cut else 100.0) + rng.normal(0, 0.2), pa, None)
        for i, (pa, c) in enumerate(zip(pages, conflicts, strict=True))
    ]
    write_campaign(tmp_path / "c", trials, config=L2SUM_CONFIG, virtualization="kvm")
    result = explain(tmp_path / "c", model, sf, ExplainSettings(permutations=499, seed=seed))
    (v,) = result.variants
    assert 3 <= v.slow <= 57
    assert v.conflict is not None and v.conflict.auc == 1.0 and v.conflict.p_value <= 0.01
    ranked = sorted(v.runs, key=lambda r: -(r.predicted_eviction or 0))
    assert all(r.slow for r in ranked[: v.slow])
    assert all(r.lines == 24 * 950_000 // 64 for r in v.runs)
    assert any("guest-physical" in n for n in result.notes)
    text = render(result)
    assert "predicted snoop-filter conflict is higher for slow trials: AUC 1.00" in text


def test_too_few_slow_trials_and_missing_pages_are_said(tmp_path, rng):
    trials = campaign_trials(rng, lambda pa: False, trials=20)
    trials[0] = (trials[0][0], 50.0, np.zeros(0, dtype=np.uint64), None)
    write_campaign(tmp_path / "c", trials)
    (v,) = explain(tmp_path / "c", None, settings=ExplainSettings(permutations=99)).variants
    assert v.best is None and v.findings == ()
    assert any("1 trials have no recorded physical pages" in n for n in v.notes)
    assert any("too few to search" in n for n in v.notes)


def test_pages_beyond_the_model_are_refused(tmp_path, rng):
    trials = campaign_trials(rng, lambda pa: False, trials=6)
    trials[2] = ("n1", 99.0, np.array([1 << 39], dtype=np.uint64), None)
    write_campaign(tmp_path / "c", trials)
    with pytest.raises(ValueError, match=r"trial 1 of l2sum-test on n1 .*beyond the valid range"):
        explain(tmp_path / "c", builtin_model("SKX_24"), settings=ExplainSettings(permutations=99))


def test_many_small_pages_per_trial(tmp_path, rng, seed):
    """4 KiB pages, 300 per trial (the parities are computed in passes): slow when more than 53% of a
    trial's pages have bits 13 and 30 of odd parity."""
    trials = []
    for i in range(80):
        pa = random_pages(rng, 300, LIMIT, 4096)
        odd = np.mean([parity(int(p), (13, 30)) for p in pa])
        trials.append((("n1", "n2")[i % 2], (90.0 if odd > 0.53 else 100.0) + rng.normal(0, 0.2), pa, None))
    write_campaign(tmp_path / "c", trials, page_size=4096)
    (v,) = explain(tmp_path / "c", None, settings=ExplainSettings(permutations=999, seed=seed)).variants
    assert v.frame_bits is not None and v.frame_bits[0] == 12
    if v.slow < 3:
        pytest.skip(f"only {v.slow} slow trials drawn")
    assert v.findings and v.findings[0].bits == (13, 30) and v.findings[0].p_adjusted <= 0.002
