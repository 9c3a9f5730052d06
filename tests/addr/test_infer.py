"""Inference round trips: models recovered from data shaped like measurements predict fresh addresses."""

from __future__ import annotations

import numpy as np
import pytest
from addr_builders import every_line, random_pages
from test_properties import random_model

from tailscope.addr.addresses import read_samples
from tailscope.addr.errors import AddrInputError
from tailscope.addr.infer import InferSettings, infer
from tailscope.addr.model import SliceHashModel
from tailscope.addr.tables import builtin_model, builtin_names

# Maurice et al., RAID 2015: client parts, o0 for 2 slices, o0..o1 for 4, o0..o2 for 8 (seed notes).
MAURICE = (0x1B5F575440, 0x2EB5FAA880, 0x3CCCC93100)


def maurice(bits: int) -> SliceHashModel:
    """Slice bit k = parity(PA & o_k): in the table format Base = identity, mask_k = o_k without bit 6+k."""
    masks = tuple(MAURICE[k] & ~(1 << (6 + k)) for k in range(bits))
    return SliceHashModel(f"maurice_{1 << bits}-slice", np.arange(1 << bits), masks, 6 + bits, 37)


def with_wrong_labels(labels: np.ndarray, n: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    out = labels.astype(np.int64).copy()
    wrong = rng.random(out.size) < fraction
    out[wrong] = (out[wrong] + rng.integers(1, n, int(wrong.sum()))) % n if n > 1 else out[wrong]
    return out


def assert_predicts_fresh_addresses(
    inferred: SliceHashModel, truth: SliceHashModel, rng: np.random.Generator
):
    fresh = rng.integers(0, truth.valid_limit, 200_000, dtype=np.uint64)
    assert inferred.valid_limit == truth.valid_limit
    assert (inferred.slices(fresh) == truth.slices(fresh)).all()


def page_samples(model: SliceHashModel, rng: np.random.Generator, pages: int, noise: float):
    addresses = every_line(random_pages(rng, pages, model.valid_limit))
    labels = with_wrong_labels(model.slices(addresses), model.n_slices, noise, rng)
    return addresses, labels


@pytest.mark.parametrize("name", ["SKX_24", "SKX_16"])
def test_a_few_dozen_pages_with_one_percent_wrong_labels(name, rng, seed):
    truth = builtin_model(name)
    addresses, labels = page_samples(truth, rng, 36, 0.01)
    result = infer(addresses, labels, InferSettings(seed=seed))
    assert result.model.length == truth.length and result.model.n_slices == truth.n_slices
    assert_predicts_fresh_addresses(result.model, truth, rng)
    assert result.top_data_bit == 37 and result.undetermined_bits == ()
    assert 0.005 < result.training_disagreements / result.training_lines < 0.015  # the planted 1%
    assert result.held_back == 4 * 32768  # 10% of 36 frames, rounded
    assert result.held_back_accuracy == pytest.approx(0.99, abs=0.005)
    assert result.lines_needed <= result.training_lines


@pytest.mark.slow
@pytest.mark.parametrize("name", builtin_names())
def test_every_shared_table_is_recovered_from_pages(name, rng, seed):
    truth = builtin_model(name)
    addresses, labels = page_samples(truth, rng, 36, 0.01)
    result = infer(addresses, labels, InferSettings(seed=seed))
    assert result.model.length == truth.length
    assert_predicts_fresh_addresses(result.model, truth, rng)
    assert result.held_back_accuracy == pytest.approx(0.99, abs=0.005)


@pytest.mark.parametrize(
    "model", [builtin_model("SKX_16"), maurice(1), maurice(2), maurice(3)], ids=lambda m: m.name
)
def test_a_few_thousand_scattered_lines_for_linear_hashes(model, rng, seed):
    addresses = rng.integers(0, model.valid_limit, 3000, dtype=np.uint64)
    labels = with_wrong_labels(model.slices(addresses), model.n_slices, 0.01, rng)
    result = infer(addresses, labels, InferSettings(seed=seed))
    assert result.method == "linear"
    assert_predicts_fresh_addresses(result.model, model, rng)
    assert result.lines_needed < 100  # ~ one line per address bit


def test_slice_ids_need_not_be_the_hash_bits(rng, seed):
    """CHA numbers are a relabelling of the hash's output: a permuted 8-slice hash is still linear."""
    truth = maurice(3)
    relabel = rng.permutation(8)
    relabelled = SliceHashModel("relabelled", relabel[truth.base], truth.masks, truth.low_bit, truth.high_bit)
    addresses = rng.integers(0, truth.valid_limit, 2000, dtype=np.uint64)
    result = infer(addresses, relabelled.slices(addresses), InferSettings(seed=seed))
    assert_predicts_fresh_addresses(result.model, relabelled, rng)


def test_short_base_sequence_from_a_few_thousand_lines_in_random_blocks(rng, seed):
    """Non-power-of-two slices need whole aligned blocks: 36 random 256-line blocks (9216 lines) pin the 24
    address bits above the block (too few would leave bits undetermined, which is reported, not guessed)."""
    truth = builtin_model("SKX_20")
    starts = rng.choice(truth.valid_limit // (256 * 64), size=36, replace=False).astype(np.uint64)
    addresses = every_line(starts * np.uint64(256 * 64), 256 * 64)
    labels = with_wrong_labels(truth.slices(addresses), 20, 0.01, rng)
    result = infer(addresses, labels, InferSettings(seed=seed, holdout=0))
    assert result.method == "blocks" and result.model.length == 256
    assert_predicts_fresh_addresses(result.model, truth, rng)


def test_tables_never_seen(rng, seed):
    for n, b in ((6, 6), (12, 10)):
        truth = random_model(rng, n, b)
        addresses, labels = page_samples(truth, rng, 36, 0.01)
        result = infer(addresses, labels, InferSettings(seed=seed))
        assert result.model.n_slices == n
        assert_predicts_fresh_addresses(result.model, truth, rng)


def test_bits_the_data_never_vary_limit_the_valid_range(rng, seed):
    """Pages only below 1 GiB: bits 30.. are undetermined, the model is valid below 2^30 and refuses above."""
    truth = builtin_model("SKX_24")
    addresses = every_line(random_pages(rng, 24, 1 << 30))
    result = infer(addresses, truth.slices(addresses), InferSettings(seed=seed))
    assert result.model.high_bit == 29 and result.top_data_bit == 29
    fresh = rng.integers(0, 1 << 30, 100_000, dtype=np.uint64)
    assert (result.model.slices(fresh) == truth.slices(fresh)).all()
    with pytest.raises(AddrInputError, match="beyond the valid range"):
        result.model.slices(np.array([1 << 30], dtype=np.uint64))


def test_a_bit_tied_to_another_is_reported_not_guessed(rng, seed):
    """In these pages bit 25 always equals bit 24: no data tell their masks apart."""
    truth = builtin_model("SKX_24")
    pages = random_pages(rng, 40, truth.valid_limit)
    bit24 = (pages >> np.uint64(24)) & np.uint64(1)
    pages = (pages & ~np.uint64(1 << 25)) | (bit24 << np.uint64(25))
    pages = np.unique(pages)
    addresses = every_line(pages)
    result = infer(addresses, truth.slices(addresses), InferSettings(seed=seed))
    assert result.undetermined_bits == (24, 25)
    # exact on the span of the pages (bit 25 == bit 24) up to the data's top bit, refused elsewhere
    assert result.model.span == (((1 << 24) | (1 << 25), 0),)
    assert result.model.high_bit == result.top_data_bit and result.model.covered_high_bit == 23
    assert any("do not determine address bits 24-25" in note for note in result.notes)
    low = rng.integers(0, 1 << 24, 50_000, dtype=np.uint64)
    assert (result.model.slices(low) == truth.slices(low)).all()
    fresh = rng.integers(0, result.model.valid_limit, 100_000, dtype=np.uint64)
    tied = ((fresh >> np.uint64(24)) & np.uint64(1)) == ((fresh >> np.uint64(25)) & np.uint64(1))
    assert (result.model.covers(fresh) == tied).all()
    assert (result.model.slices(fresh[tied]) == truth.slices(fresh[tied])).all()
    with pytest.raises(AddrInputError, match=r"outside the span .*parity\(PA & 0x3000000\) must be 0"):
        result.model.slices(fresh[~tied][:1])
    covered = result.model.covered_model()
    assert covered is not None and covered.span == () and covered.valid_limit == 1 << 24


def test_scattered_lines_of_a_non_linear_hash_are_refused_with_the_reason(rng, seed):
    truth = builtin_model("SKX_24")
    addresses = rng.integers(0, truth.valid_limit, 3000, dtype=np.uint64)
    with pytest.raises(AddrInputError, match="aligned blocks"):
        infer(addresses, truth.slices(addresses), InferSettings(seed=seed))


def test_missing_slices_and_empty_input_are_refused():
    with pytest.raises(AddrInputError, match="never show slice 1"):
        infer(np.array([0, 64], dtype=np.uint64), np.array([0, 2]))
    with pytest.raises(AddrInputError, match="no samples"):
        infer(np.zeros(0, dtype=np.uint64), np.zeros(0))


def test_repeated_measurements_vote(rng, seed):
    truth = maurice(2)
    addresses = rng.integers(0, truth.valid_limit, 1500, dtype=np.uint64)
    right = truth.slices(addresses).astype(np.int64)
    # every line twice right and once wrong: the majority wins, the disagreement is counted
    all_addresses = np.concatenate([addresses, addresses, addresses])
    labels = np.concatenate([right, right, (right + 1) % 4])
    result = infer(all_addresses, labels, InferSettings(seed=seed))
    assert result.conflicting_lines == 1500 and result.training_disagreements == 0
    assert_predicts_fresh_addresses(result.model, truth, rng)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slice,address\n", None),
        ("addr,slice\n0x0,1\n", r"samples.csv:1: expected a header naming columns address and slice"),
        ("address,slice\n0x0,1\n0x40\n", r"samples.csv:3: expected 2 fields"),
        ("address,slice\n0x0,1\n0xzz,2\n", r"samples.csv:3: expected a physical address .* got '0xzz'"),
        ("address,slice\n0x0,1\n0x40,\n", r"samples.csv:3: expected a slice id .* got ''"),
        ("address,slice\n0x0,1\n0x40,-1\n", r"samples.csv:3: expected a slice id"),
        ("address,slice\n0x0,1\n0x40,99999\n", r"samples.csv:3: expected a slice id"),
        ("", r"samples.csv:1: empty"),
    ],
)
def test_sample_csv_errors_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "samples.csv"
    path.write_text(text)
    if message is None:
        assert read_samples(path).addresses.size == 0
        return
    with pytest.raises(AddrInputError, match=message):
        read_samples(path)


def test_sample_csv_reads_extra_columns_and_keeps_line_numbers(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("address,slice,share\n0x40,3,0.99\n\n128,2,0.97\n")
    s = read_samples(path)
    assert s.addresses.tolist() == [64, 128] and s.slices.tolist() == [3, 2] and s.lines.tolist() == [2, 4]


def test_lines_missing_from_the_map_are_tolerated(rng, seed):
    """A measurement that gave up on 3% of the lines: blocks measured to >= 90% still align."""
    truth = builtin_model("SKX_20")
    addresses, labels = page_samples(truth, rng, 36, 0.01)
    keep = rng.random(addresses.size) >= 0.03
    result = infer(addresses[keep], labels[keep], InferSettings(seed=seed))
    assert result.method == "blocks" and result.model.length == 256
    assert_predicts_fresh_addresses(result.model, truth, rng)
