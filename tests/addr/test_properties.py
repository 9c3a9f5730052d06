"""Slice loads of pages, runs and thread chunks; block properties of models not in any table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from addr_builders import every_line, random_pages

from tailscope.addr.errors import AddressRangeError
from tailscope.addr.model import SliceHashModel
from tailscope.addr.properties import block_uniformity, imbalance, page_slice_counts, slice_loads
from tailscope.addr.tables import builtin_model


def test_page_counts_from_the_block_property_equal_mapping_every_line(rng):
    model = builtin_model("SKX_18")
    big = random_pages(rng, 6, model.valid_limit)
    small = random_pages(rng, 50, model.valid_limit, 4096)
    pa = np.concatenate([big, small])
    sizes = np.array([2 << 20] * 6 + [4096] * 50, dtype=np.uint64)
    counts = page_slice_counts(model, pa, sizes)
    for i in (0, 5, 6, 30, 55):
        lines = every_line(pa[i : i + 1], int(sizes[i]))
        assert counts[i].tolist() == np.bincount(model.slices(lines), minlength=18).tolist()
    # a 2 MiB page is 64 uniform blocks of 512 lines: 64 * (24 or 29) lines per slice
    assert counts[0].tolist() == [64 * 29] * 16 + [64 * 24] * 2


def test_a_page_reaching_beyond_the_range_is_refused():
    model = builtin_model("SKX_24")
    last = np.array([model.valid_limit - (2 << 20)], dtype=np.uint64)
    assert page_slice_counts(model, last, np.array([2 << 20], dtype=np.uint64)).sum() == 32768
    with pytest.raises(AddressRangeError):
        page_slice_counts(model, last, np.array([4 << 20], dtype=np.uint64))


def test_imbalance_by_hand():
    assert imbalance(np.array([[2, 2, 2, 2], [4, 2, 2, 0], [0, 0, 0, 0]])).tolist() == [0.0, 1.0, 0.0]


def test_slice_loads_per_page_run_and_thread(rng):
    model = builtin_model("SKX_24")
    pa = random_pages(rng, 6, model.valid_limit, 4096)
    pages = pd.DataFrame(
        {
            "run_id": ["r1", "r1", "r1", "r2", "r2", "r2"],
            "array": "data",
            "thread": [0, 0, 1, 0, 1, 1],
            "physical_address": pa.astype(np.int64),
            "page_size": 4096,
        }
    )
    per_page = slice_loads(model, pages, ())
    per_run = slice_loads(model, pages, ("run_id",))
    per_thread = slice_loads(model, pages, ("run_id", "thread"))
    names = [f"slice_{s}" for s in range(24)]
    assert per_page["lines"].tolist() == [64] * 6
    assert per_run["lines"].tolist() == [192, 192] and per_run["pages"].tolist() == [3, 3]
    expected = per_page[names].to_numpy()[:3].sum(axis=0)
    assert per_run.loc[per_run["run_id"] == "r1", names].to_numpy()[0].tolist() == expected.tolist()
    t = per_thread.set_index(["run_id", "thread"])
    assert t.loc[("r2", 1), "lines"] == 128
    manual = np.bincount(model.slices(every_line(pa[4:6], 4096)), minlength=24)
    assert t.loc[("r2", 1), names].tolist() == manual.tolist()
    assert t.loc[("r2", 1), "imbalance"] == pytest.approx(manual.max() / manual.mean() - 1)


def random_model(rng: np.random.Generator, n: int, b: int, high: int = 37) -> SliceHashModel:
    """A model no table holds: n slices over a 2^b base sequence (every slice present), random masks."""
    base = np.concatenate([np.arange(n), rng.integers(0, n, (1 << b) - n)])
    rng.shuffle(base)
    low = 6 + b
    span = (1 << (high + 1)) - (1 << low)
    masks = tuple(int(m) & span for m in rng.integers(0, 1 << 62, b, dtype=np.int64))
    return SliceHashModel(f"random_{n}-slice", base, masks, low, high)


def test_properties_of_unseen_models_hold_on_mapped_blocks(rng):
    for n, b in ((3, 4), (6, 7), (12, 9), (7, 8)):
        model = random_model(rng, n, b)
        u = block_uniformity(model)
        assert sum(u.lines_per_slice) == u.block_lines and u.block_lines <= model.length
        for start in rng.integers(0, model.valid_limit // (u.block_lines * 64), 10, dtype=np.uint64):
            lines = start * np.uint64(u.block_lines * 64) + np.arange(
                u.block_lines, dtype=np.uint64
            ) * np.uint64(64)
            assert tuple(np.bincount(model.slices(lines), minlength=n)) == u.lines_per_slice


def test_a_base_made_of_repeated_halves_has_a_shorter_uniform_block():
    """Base = the same 8-entry block repeated: every aligned 8-line block is uniform, L is 64."""
    base = np.tile(np.array([0, 1, 2, 3, 4, 5, 0, 1]), 8)
    model = SliceHashModel("repeat", base, (1 << 12,), 12, 20)
    u = block_uniformity(model)
    assert u.block_lines == 8
    assert u.lines_per_slice == (2, 2, 1, 1, 1, 1)
    assert u.fraction_lost == pytest.approx(2 / (8 / 6) - 1)
    assert 8 in u.symmetries and u.permutations == 2
