"""The native map against the formula evaluated in plain Python, range refusal, and the address parser."""

from __future__ import annotations

import numpy as np
import pytest

from tailscope.addr.errors import AddressRangeError
from tailscope.addr.kernel import AddressHash, format_lines, parse_addresses
from tailscope.addr.properties import block_uniformity
from tailscope.addr.tables import builtin_model, builtin_names


def formula(model, pa: int) -> int:
    """slice = Base[((PA >> 6) mod L) XOR P], bit k of P = parity(PA & mask_k): the README, literally."""
    p = 0
    for k in range(model.index_bits):
        p |= (bin(pa & model.mask(k)).count("1") % 2) << k
    return int(model.base[((pa >> 6) % model.length) ^ p])


@pytest.mark.parametrize("name", builtin_names())
def test_map_equals_the_formula(name, rng):
    model = builtin_model(name)
    addresses = rng.integers(0, model.valid_limit, 3000, dtype=np.uint64)
    addresses[:3] = [0, model.valid_limit - 64, model.valid_limit - 1]
    got = model.slices(addresses)
    assert got.dtype == np.uint16
    assert got.tolist() == [formula(model, int(a)) for a in addresses]


@pytest.mark.parametrize("name", builtin_names())
def test_every_aligned_uniform_block_has_the_computed_counts(name, rng):
    """The block property (computed from the base sequence) holds for mapped blocks at random addresses."""
    model = builtin_model(name)
    u = block_uniformity(model)
    starts = rng.integers(0, model.valid_limit // (u.block_lines * 64), 20, dtype=np.uint64)
    lines = np.arange(u.block_lines, dtype=np.uint64) * np.uint64(64)
    for start in starts:
        slices = model.slices(start * np.uint64(u.block_lines * 64) + lines)
        assert tuple(np.bincount(slices, minlength=model.n_slices)) == u.lines_per_slice
    # and a block half as long at some address does not (the block is the smallest)
    if u.block_lines > 1:
        half = u.block_lines // 2
        counts = {
            tuple(
                np.bincount(model.slices(np.uint64(s * half * 64) + lines[:half]), minlength=model.n_slices)
            )
            for s in range(model.length // half)
        }
        assert len(counts) > 1


def test_refuses_the_first_address_beyond_the_range(rng):
    model = builtin_model("SKX_24")
    a = rng.integers(0, model.valid_limit, 1000, dtype=np.uint64)
    a[417] = model.valid_limit
    a[900] = np.uint64(1) << np.uint64(63)
    with pytest.raises(AddressRangeError, match="0x4000000000 is beyond the valid range of SKX_24") as info:
        model.slices(a)
    assert info.value.position == 417
    with pytest.raises(AddressRangeError, match="negative"):
        model.slices(np.array([5, -64]))


def test_shape_is_kept_and_empty_input_maps_to_empty():
    model = builtin_model("SKX_16")
    assert model.slices(np.zeros((3, 2), dtype=np.uint64)).shape == (3, 2)
    assert model.slices(np.zeros(0, dtype=np.uint64)).size == 0


def test_generic_linear_hash_without_table(rng):
    rows = (0x40, 0x80 | 0x1000, 0x30000)
    h = AddressHash(rows, None, 40, name="set index")
    a = rng.integers(0, 1 << 41, 5000, dtype=np.uint64)
    expected = [sum((bin(int(x) & r).count("1") & 1) << k for k, r in enumerate(rows)) for x in a]
    assert h.map(a).tolist() == expected
    with pytest.raises(ValueError, match="kernel refused"):
        AddressHash((1 << 50,), None, 40)  # a row above the valid range
    with pytest.raises(ValueError, match=r"1\.\.16"):
        AddressHash((), None, 40)


def test_parser_accepts_hex_decimal_blanks_and_crlf():
    values, bad = parse_addresses(
        b"0x10\n  64\t\r\n0XFFFFFFFFFFFFFFFF\n18446744073709551615\n0x00000000000000000042"
    )
    assert bad is None
    assert values.tolist() == [16, 64, 2**64 - 1, 2**64 - 1, 0x42]
    assert parse_addresses(b"")[0].size == 0


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (b"0x10\n\n0x20\n", 2),  # an empty line is not an address
        (b"0x10\n0x1g\n", 2),
        (b"12a\n", 1),
        (b"0x\n", 1),
        (b"18446744073709551616\n", 1),  # 2^64
        (b"0x10000000000000000\n", 1),
        (b"-5\n", 1),
        (b"1 2\n", 1),
    ],
)
def test_parser_reports_the_first_bad_line(text, line):
    _, bad = parse_addresses(text)
    assert bad == line


def test_format_lines_writes_one_decimal_per_line(rng):
    values = np.concatenate([np.array([0, 9, 10, 99, 100, 65535]), rng.integers(0, 65536, 5000)]).astype(
        np.uint16
    )
    assert format_lines(values) == "".join(f"{v}\n" for v in values.tolist())
    assert format_lines(np.zeros(0, dtype=np.uint16)) == ""
