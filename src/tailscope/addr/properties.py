"""Properties of a slice-hash model, and slice loads of pages, runs and thread chunks.

Uniform block (McCalpin, IXPUG 2018): the smallest naturally aligned block of B = 2^j cache lines such that
every aligned block of that size assigns the same number of lines to each slice. An aligned B-block lies
inside one aligned L-block, where P is constant, so it maps onto the B-sub-block (i >> j) XOR (P >> j) of
the base sequence, permuted inside by the low bits of P: every B-block of addresses has the same counts iff
every aligned B-sub-block of the base sequence has. B is at most L. The capacity fraction lost is
max(lines per slice) / (B / n) - 1: the most loaded slices overflow that much before the aggregate is full.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tailscope.addr import gf2
from tailscope.addr.model import LINE_BITS, SliceHashModel

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `tailscope --help` must not load pandas

LINE = 1 << LINE_BITS


@dataclass(frozen=True)
class BlockUniformity:
    block_lines: int  # B
    lines_per_slice: tuple[int, ...]  # in every aligned B-block, slice 0 first
    fraction_lost: float  # max / (B / n) - 1
    permutations: int  # distinct P values: 2^rank(masks) (McCalpin's "# permutations observed")
    distinct_sequences: int  # distinct L-line block sequences (fewer when the base has XOR symmetries)
    symmetries: tuple[int, ...]  # t != 0 with Base[i ^ t] == Base[i] for every i

    @property
    def min_lines(self) -> int:
        return min(self.lines_per_slice)

    @property
    def max_lines(self) -> int:
        return max(self.lines_per_slice)


def block_counts(base: np.ndarray, block: int, n: int) -> np.ndarray:
    """Lines per slice in every aligned `block`-line sub-block of `base`: shape (len(base) // block, n)."""
    blocks = base.size // block
    keys = np.repeat(np.arange(blocks, dtype=np.int64), block) * n + base.astype(np.int64)
    return np.bincount(keys, minlength=blocks * n).reshape(blocks, n)


def xor_symmetries(base: np.ndarray) -> tuple[int, ...]:
    """Every t != 0 with base[i ^ t] == base[i] for all i (the masks are defined only modulo these)."""
    agree = gf2.xor_agreement(base, base[None, :], int(base.max()) + 1)[0]
    return tuple(int(t) for t in np.flatnonzero(agree == base.size) if t)


def block_uniformity(model: SliceHashModel) -> BlockUniformity:
    n = model.n_slices
    block = 1
    while True:
        counts = block_counts(model.base, block, n)
        if (counts == counts[0]).all():
            break
        block *= 2
    per_slice = counts[0]
    lost = float(per_slice.max() / (block / n) - 1.0)
    b = model.index_bits
    high = range(model.low_bit, model.high_bit + 1)
    masks = np.array([[(model.mask(k) >> bit) & 1 for bit in high] for k in range(b)], dtype=bool)
    rank = gf2.rank(masks) if b else 0
    symmetries = xor_symmetries(model.base) if b else ()
    # distinct block sequences: P modulo the symmetries, 2^(rank(P's span + symmetries) - dim symmetries)
    distinct = 1 << rank
    if symmetries:
        sym = gf2.bits_matrix(np.array(symmetries, dtype=np.uint64), b)
        distinct = 1 << (gf2.rank(np.vstack([masks.T, sym])) - gf2.rank(sym))
    return BlockUniformity(
        block_lines=block,
        lines_per_slice=tuple(int(c) for c in per_slice),
        fraction_lost=lost,
        permutations=1 << rank,
        distinct_sequences=distinct,
        symmetries=symmetries,
    )


# --- slice loads of pages -----------------------------------------------------------------------------
def page_slice_counts(
    model: SliceHashModel,
    addresses: np.ndarray,
    page_sizes: np.ndarray,
    *,
    uniformity: BlockUniformity | None = None,
) -> np.ndarray:
    """Lines per slice of each page (shape pages x n). Every page is checked against the valid range.

    A page that is a whole number of aligned uniform blocks is counted from the block property; the others
    (4 KiB pages under a long uniform block) are mapped line by line.
    """
    pa = np.asarray(addresses, dtype=np.uint64)
    sizes = np.asarray(page_sizes, dtype=np.uint64)
    n = model.n_slices
    out = np.zeros((pa.size, n), dtype=np.int64)
    if pa.size == 0:
        return out
    # the whole page must be mapped: its last line decides the range check
    model.slices(pa + sizes - np.uint64(LINE))
    uni = uniformity or block_uniformity(model)
    block_bytes = np.uint64(uni.block_lines * LINE)
    whole = (sizes % block_bytes == 0) & (pa % block_bytes == 0)
    if whole.any():
        out[whole] = (sizes[whole] // block_bytes).astype(np.int64)[:, None] * np.array(uni.lines_per_slice)
    rest = np.flatnonzero(~whole)
    if rest.size:
        lines = (sizes[rest] // np.uint64(LINE)).astype(np.int64)
        owner = np.repeat(np.arange(rest.size), lines)
        starts = np.cumsum(lines) - lines
        offsets = np.arange(int(lines.sum()), dtype=np.int64) - np.repeat(starts, lines)
        line_pa = pa[rest][owner] + offsets.astype(np.uint64) * np.uint64(LINE)
        slices = model.slices(line_pa).astype(np.int64)
        counts = np.bincount(owner * n + slices, minlength=rest.size * n).reshape(rest.size, n)
        out[rest] = counts
    return out


def imbalance(counts: np.ndarray) -> np.ndarray:
    """max / mean - 1 of each row of lines-per-slice counts (0 for an empty row)."""
    c = np.atleast_2d(counts).astype(float)
    mean = c.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(mean > 0, c.max(axis=1) / mean - 1.0, 0.0)
    return out


def slice_loads(model: SliceHashModel, pages: pd.DataFrame, by: tuple[str, ...]) -> pd.DataFrame:
    """Lines per slice summed over the pages of each group (`by`: () per page, ("run_id",) per run,
    ("run_id", "thread") per thread chunk); columns: the group keys, pages, lines, slice_0.., imbalance."""
    import pandas as pd

    counts = page_slice_counts(
        model, pages["physical_address"].to_numpy(np.uint64), pages["page_size"].to_numpy(np.uint64)
    )
    names = [f"slice_{s}" for s in range(model.n_slices)]
    frame = pd.DataFrame(counts, columns=names, index=pages.index)
    if by:
        keys = pages[list(by)].copy()
        if "thread" in by:
            keys["thread"] = keys["thread"].fillna(-1).astype(np.int64)
        frame = pd.concat([keys, frame], axis=1)
        frame["pages"] = 1
        grouped = frame.groupby(list(by), sort=True, dropna=False)[[*names, "pages"]].sum().reset_index()
    else:
        keep = [c for c in ("run_id", "array", "thread", "physical_address", "page_size") if c in pages]
        grouped = pd.concat([pages[keep].reset_index(drop=True), frame.reset_index(drop=True)], axis=1)
        grouped["pages"] = 1
    grouped["lines"] = grouped[names].sum(axis=1)
    grouped["imbalance"] = imbalance(grouped[names].to_numpy())
    return grouped
