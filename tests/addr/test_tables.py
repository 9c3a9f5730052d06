"""Slice-hash tables: reading, writing, refusing malformed files, the built-in models and their properties."""

from __future__ import annotations

import numpy as np
import pytest

from tailscope.addr.errors import AddrInputError
from tailscope.addr.model import SliceHashModel
from tailscope.addr.properties import block_uniformity
from tailscope.addr.tables import builtin_dir, builtin_model, builtin_names, load_model, write_tables

# McCalpin, IXPUG 2018 (seed 002), "Address Hash Properties by Core Count": cache lines for a uniform
# distribution, permutations observed, fraction lost (the 16c/24c rows studied extensively).
SLIDE_TABLE = {
    "SKX_14-slice": (16384, 2048, 0.0254),
    "SKX_16-slice": (16, 16, 0.0),
    "SKX_18-slice": (512, 2048, 0.0195),
    "SKX_20-slice": (256, 256, 0.0156),
    "SKX_22-slice": (16384, 4096, 0.0366),
    "SKX_24-slice": (512, 512, 0.03125),
    "SKX_26-slice": (16384, 8192, 0.0220),
    "SKX_28-slice": (4096, 4096, 0.0254),
}

# Seed 002, appendix 1: the 8160's base sequence, 'a' = CHA 0 ... 'x' = CHA 23, 8 lines of 64.
SEED_BASE_SEQUENCE = (
    "adkjhunwfgpmcritbcligvmxexovdqjsadkjxevovgxmsbqlbcliwfupuhwntark"
    "onehrktalibcupwfpmfgqlsbsjqdvoxeonehjsdqlqbsmxgvpmfgitcrkratnwhu"
    "itcrpmfgnwhukjadjsdqonehmxgvlqbsqlsbpmfgvoxesjqdrktaonehupwftirc"
    "wfupbclitarkehonxevoadkjsbqlvgxmgvmxbclidqjsexovhunwadkjcritfwpu"
    "bslqgfmpexovdajkatkrhunwfwpucbilrctiwfupuhwndajkqdsjxevovgxmcbil"
    "xmvgilcbsjqdnohewnuhrktatircmpgfpufwitcrkratnoheovexjsdqlqbsmpgf"
    "jkdaovexmpgflqbsitcrpufwnohekratrktawnuhmpgftircqlsbxmvgnohesjqd"
    "henoqdsjcbilvgxmwfuprctidajkuhwnhunwatkrcbilfwpugvmxbslqdajkexov"
)
# Seed 002, appendix 1: the 2018 masks (permutation bit 0 first), "valid up to 96 GiB (maybe 128?)".
SEED_MASKS_2018 = (
    0x0B72C98000,
    0x16E5930000,
    0x0DCB260000,
    0x1B964C0000,
    0x1C5E518000,
    0x18BCA30000,
    0x1A0B8F8000,
    0x1F65D68000,
    0x15B9648000,
)


def test_every_shared_table_is_built_in():
    assert builtin_names() == [
        "ICX_28-slice",
        "SKX_14-slice",
        "SKX_16-slice",
        "SKX_18-slice",
        "SKX_20-slice",
        "SKX_22-slice",
        "SKX_24-slice",
        "SKX_26-slice",
        "SKX_28-slice",
    ]
    assert (builtin_dir() / "README.md").read_text().count("McCalpin") >= 2  # attribution kept


@pytest.mark.parametrize("name", sorted(SLIDE_TABLE))
def test_uniformity_properties_match_the_slides(name):
    block, permutations, lost = SLIDE_TABLE[name]
    u = block_uniformity(builtin_model(name))
    assert u.block_lines == block
    assert u.permutations == permutations
    assert u.fraction_lost == pytest.approx(lost, abs=5e-5)


def test_24_slice_part_is_512_lines_21_and_22_per_slice():
    u = block_uniformity(builtin_model("SKX_24"))
    assert u.block_lines == 512
    assert u.lines_per_slice == (21,) * 16 + (22,) * 8
    assert u.fraction_lost == pytest.approx(22 / (512 / 24) - 1)
    assert u.symmetries == ()


def test_icx_28_properties_and_symmetries():
    """ICX_28 is not on the slides: its properties are computed, and its base sequence has XOR symmetries
    (checked here directly on the table)."""
    model = builtin_model("ICX_28")
    u = block_uniformity(model)
    assert u.block_lines == 16384 and sum(u.lines_per_slice) == 16384
    assert set(u.lines_per_slice) == {512, 596, 600}
    assert u.symmetries == (1269, 6371, 7190)
    i = np.arange(model.length)
    for t in u.symmetries:
        assert (model.base[i ^ t] == model.base).all()
    assert not (model.base[i ^ 1] == model.base).all()


def test_built_in_24_slice_is_the_seed_sequence_with_masks_corrected_at_bit_37():
    model = builtin_model("SKX_24-slice")
    assert model.base.tolist() == [ord(c) - ord("a") for c in SEED_BASE_SEQUENCE]
    assert (model.low_bit, model.high_bit) == (15, 37)
    for k, old in enumerate(SEED_MASKS_2018):
        extra = model.mask(k) ^ old
        assert extra == ((1 << 37) if k in (0, 2, 5) else 0), k


def test_seed_masks_agree_below_128_gib_only(rng):
    new = builtin_model("SKX_24")
    old = SliceHashModel("seed-2018", new.base, SEED_MASKS_2018, 15, 36)
    low = rng.integers(0, 1 << 37, 200_000, dtype=np.uint64)
    assert (old.slices(low) == new.slices(low)).all()
    high = low | np.uint64(1 << 37)
    differ = np.mean(new.slices(high) != SliceHashModel("x", new.base, SEED_MASKS_2018, 15, 37).slices(high))
    assert differ > 0.5  # three permutation bits flip above 128 GiB
    with pytest.raises(AddrInputError, match="beyond the valid range"):
        old.slices(high[:1])


def test_write_and_load_back(tmp_path, rng):
    model = builtin_model("SKX_18")
    base_path, masks_path = write_tables(model, tmp_path, "copy_18-slice")
    assert base_path.name == "BaseSequence_copy_18-slice.tbl"
    assert masks_path.read_text().splitlines()[0] == "18 37"
    assert len(masks_path.read_text().split()) == 2 + 14
    again = load_model(base_path, masks_path)
    assert again.name == "copy_18-slice"
    assert (again.base == model.base).all() and again.masks[: model.index_bits] == model.masks[
        : model.index_bits
    ]
    a = rng.integers(0, model.valid_limit, 10_000, dtype=np.uint64)
    assert (again.slices(a) == model.slices(a)).all()


def test_builtin_names_resolve_loosely_and_unknown_is_refused():
    assert builtin_model("skx_24").name == "SKX_24-slice"
    with pytest.raises(AddrInputError, match=r"no built-in slice-hash model 'SKX_99'.*SKX_24-slice"):
        builtin_model("SKX_99")


def _tables(tmp_path, base: str, masks: str):
    b = tmp_path / "BaseSequence_t_4-slice.tbl"
    m = tmp_path / "PermSelectMasks_t_4-slice.tbl"
    b.write_text(base)
    m.write_text(masks)
    return b, m


@pytest.mark.parametrize(
    ("base", "masks", "where", "message"),
    [
        ("0\n1\nx\n3\n", "8 37\n0x100 0x200\n", "BaseSequence_t_4-slice.tbl:3", "expected a slice id"),
        ("0\n1\n2\n", "8 37\n0x0\n", "BaseSequence_t_4-slice.tbl", "3 entries; expected a power of two"),
        ("0\n1\n3\n3\n", "8 37\n0x0\n", "BaseSequence_t_4-slice.tbl", r"missing \[2\]"),
        ("", "8 37\n0x0\n", "BaseSequence_t_4-slice.tbl", "empty"),
        ("0\n1\n2\n3\n", "8\n0x0\n", "PermSelectMasks_t_4-slice.tbl:1", "two decimal numbers"),
        ("0\n1\n2\n3\n", "8 37\n", "PermSelectMasks_t_4-slice.tbl:2", "expected two lines"),
        ("0\n1\n2\n3\n", "8 37\n0x100 zz\n", "PermSelectMasks_t_4-slice.tbl:2", "'zz'"),
        (
            "0\n1\n2\n3\n",
            "8 37\n0x100 0x200 0x400\n",
            "PermSelectMasks_t_4-slice.tbl:2",
            "only 2 permutation",
        ),
        ("0\n1\n2\n3\n", "8 30\n0x80000000\n", "PermSelectMasks_t_4-slice.tbl:2", "bit 31, outside"),
        ("0\n1\n2\n3\n", "7 37\n0x80\n", "PermSelectMasks_t_4-slice.tbl:1", "inside the base sequence"),
        ("0\n1\n2\n3\n", "38 37\n0x0\n", "PermSelectMasks_t_4-slice.tbl:1", "lowest <= highest"),
        ("0\n1\n2\n3\n", "8 37\n0x100\nmore\n", "PermSelectMasks_t_4-slice.tbl:3", "unexpected content"),
    ],
)
def test_malformed_tables_name_file_and_line(tmp_path, base, masks, where, message):
    b, m = _tables(tmp_path, base, masks)
    with pytest.raises(AddrInputError, match=message) as info:
        load_model(b, m)
    assert str(info.value).startswith(str(tmp_path / where))


def test_missing_table_file(tmp_path):
    with pytest.raises(AddrInputError, match="no such file"):
        load_model(tmp_path / "BaseSequence_none.tbl", tmp_path / "PermSelectMasks_none.tbl")


def test_fewer_masks_than_permutation_bits_are_zero(tmp_path):
    b, m = _tables(tmp_path, "0\n1\n2\n3\n", "8 37\n0x100\n")
    model = load_model(b, m)
    assert model.masks == (0x100,) and model.mask(1) == 0
    # line 1 at 0x100 (bit 8 set): P = 1, index = 0 ^ 1
    assert model.slices(np.array([0x100, 0x140, 0x0], dtype=np.uint64)).tolist() == [1, 0, 0]
