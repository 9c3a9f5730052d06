"""A configurable snoop-filter model: which sets of pages would evict L2-resident data.

The snoop filter is distributed over the CHAs by the slice hash and must track every line held in any
L1/L2; a (slice, set) that has to track more lines than it has ways evicts some of them from their L2
(seed 000 VI, seed 002). Its geometry is undocumented: the defaults are what others report for SKX/CLX
(2048 sets x 12 ways per slice; 16 ways on ICX) and the set index within a slice is, by default, the line
address modulo the set count (address bits 6..16). Any GF(2)-linear set index can be given as masks.

For a run, every data line is first placed in its thread's L2 (sets = l2 bytes / 64 / ways, index = line
address modulo the set count; a set keeps the last `l2_ways` lines a sequential sweep touches), then the
resident lines are counted per (slice, set). The predicted conflict is the number of lines above `ways`
in each (slice, set), as a fraction of the resident lines: 0 when the pages spread evenly.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tailscope.addr.errors import AddrInputError
from tailscope.addr.kernel import AddressHash
from tailscope.addr.model import LINE_BITS, SliceHashModel


@dataclass(frozen=True)
class SnoopFilterModel:
    sets: int = 2048  # per slice
    ways: int = 12
    set_masks: tuple[int, ...] = ()  # set bit k = parity(PA & set_masks[k]); () = plain modulo
    l2_bytes: int = 1 << 20
    l2_ways: int = 16

    def __post_init__(self) -> None:
        for name, value in (("sets", self.sets), ("l2 sets", self.l2_sets)):
            if value < 1 or value & (value - 1) or value > 1 << 16:
                raise AddrInputError(
                    f"snoop-filter model: {name} = {value}; expected a power of two up to 65536"
                )
        if self.ways < 1 or self.l2_ways < 1:
            raise AddrInputError("snoop-filter model: ways must be >= 1")
        if self.set_masks and len(self.set_masks) != self.sets.bit_length() - 1:
            raise AddrInputError(
                f"snoop-filter model: {len(self.set_masks)} set masks for {self.sets} sets; "
                f"expected {self.sets.bit_length() - 1}"
            )

    @property
    def l2_sets(self) -> int:
        return max(self.l2_bytes // 64 // self.l2_ways, 1)

    @property
    def set_rows(self) -> tuple[int, ...]:
        if self.set_masks:
            return self.set_masks
        return tuple(1 << (LINE_BITS + k) for k in range(max(self.sets.bit_length() - 1, 1)))

    @cached_property
    def _set_hash(self) -> AddressHash:
        return AddressHash(self.set_rows, None, 63, name="snoop-filter set index")

    def set_index(self, addresses: np.ndarray) -> np.ndarray:
        if self.sets == 1:
            return np.zeros(np.shape(addresses), dtype=np.uint16)
        return self._set_hash.map(addresses)


@dataclass(frozen=True)
class ConflictEstimate:
    lines: int  # data lines modelled
    resident: int  # of them, held in the L2s
    excess: int  # resident lines beyond the ways of their (slice, set)
    max_occupancy: int  # most lines any (slice, set) must track
    slice_imbalance: float  # resident lines per slice: max / mean - 1
    set_imbalance: float  # resident lines per (slice, set): max / mean - 1

    @property
    def predicted_eviction(self) -> float:
        return self.excess / self.resident if self.resident else 0.0


def l2_resident(addresses: np.ndarray, threads: np.ndarray, sf: SnoopFilterModel) -> np.ndarray:
    """Mask of the lines that stay in their thread's L2 after a sequential sweep in the given order."""
    n = addresses.size
    l2_set = ((addresses >> np.uint64(LINE_BITS)) & np.uint64(sf.l2_sets - 1)).astype(np.int64)
    thread = np.asarray(threads, dtype=np.int64)
    thread = thread - thread.min() if n else thread
    key = thread * sf.l2_sets + l2_set
    counts = np.bincount(key, minlength=1)
    if n == 0 or counts.max() <= sf.l2_ways:
        return np.ones(n, dtype=bool)
    order = np.lexsort((np.arange(n), key))  # by (thread, set), sweep order inside
    sorted_key = key[order]
    group_end = np.searchsorted(sorted_key, sorted_key, side="right")
    from_end = group_end - np.arange(n) - 1  # lines touched after this one in the same set
    keep = np.empty(n, dtype=bool)
    keep[order] = from_end < sf.l2_ways
    return keep


def estimate(
    model: SliceHashModel, sf: SnoopFilterModel, addresses: np.ndarray, threads: np.ndarray
) -> ConflictEstimate:
    """Predicted snoop-filter conflict of one run's data lines (addresses in sweep order, their threads)."""
    a = np.asarray(addresses, dtype=np.uint64)
    resident = l2_resident(a, threads, sf)
    held = a[resident]
    n = model.n_slices
    slices = model.slices(held).astype(np.int64)
    sets = sf.set_index(held).astype(np.int64)
    occupancy = np.bincount(slices * sf.sets + sets, minlength=n * sf.sets)
    per_slice = occupancy.reshape(n, sf.sets).sum(axis=1)
    excess = int(np.maximum(occupancy - sf.ways, 0).sum())

    def imbalance(x: np.ndarray) -> float:
        mean = float(x.mean()) if x.size else 0.0
        return float(x.max() / mean - 1.0) if mean > 0 else 0.0

    return ConflictEstimate(
        lines=int(a.size),
        resident=int(held.size),
        excess=excess,
        max_occupancy=int(occupancy.max()) if occupancy.size else 0,
        slice_imbalance=imbalance(per_slice),
        set_imbalance=imbalance(occupancy),
    )
