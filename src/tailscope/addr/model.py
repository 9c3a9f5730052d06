"""A slice-hash model: base sequence + permutation-select masks (McCalpin's format), and its valid range.

    slice(PA) = Base[((PA >> 6) mod L) XOR P],   bit k of P = parity(PA & mask_k),   L = len(Base) = 2^b

Within every naturally aligned block of L cache lines P is constant, so the block holds the base sequence
permuted by XOR with P. The masks use only address bits low_bit..high_bit with low_bit >= 6 + b, and the
model is valid for PA < 2^(high_bit + 1): addresses above are refused, never mapped (a model learnt from
memory below 128 GiB says nothing about bit 37). Slice ids are the uncore's CHA numbers, 0..n-1.

An inferred model may hold only on part of that range: the affine span of the frames it was measured on
(`span`: parity conditions parity(PA & mask) == value that every mapped address must meet). Outside the span
the data say nothing: a frame not in the span has a permutation (and, for the frame at address 0, a base
sequence) that no measurement fixed, so such addresses are refused like addresses above the range.
`covered_high_bit` is the largest whole range [0, 2^(h+1)) inside the span: what the table format can say.

The whole map is GF(2)-linear up to the final lookup: index = low b line bits XOR P is the parity of PA with
the rows (1 << (6 + k)) | mask_k, which is how the native kernel evaluates it (`kernel.AddressHash`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tailscope.addr.errors import AddressRangeError
from tailscope.addr.kernel import AddressHash

LINE_BITS = 6  # 64-byte cache lines


@dataclass(frozen=True, eq=False)
class SliceHashModel:
    """One processor configuration's slice hash. `masks[k]` selects permutation bit k (missing = 0)."""

    name: str
    base: np.ndarray  # uint16 slice ids, length 2^index_bits
    masks: tuple[int, ...]
    low_bit: int
    high_bit: int
    source: str = ""  # where the model came from (table paths, "built-in", "inferred")
    # parity conditions (mask, value): parity(PA & mask) == value for every address the model covers
    span: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        base = np.array(self.base, dtype=np.uint16)  # a copy: the caller's array stays writable
        object.__setattr__(self, "base", base)
        base.setflags(write=False)
        problem = model_problem(base, self.masks, self.low_bit, self.high_bit)
        if problem:
            raise ValueError(f"slice-hash model {self.name}: {problem[1]}")
        span = tuple((int(m), int(v) & 1) for m, v in self.span)
        if any(m < 0 or m >> 64 for m, _ in span):
            raise ValueError(f"slice-hash model {self.name}: span masks must be 64-bit values")
        object.__setattr__(self, "span", span)

    # --- shape --------------------------------------------------------------------------------------
    @property
    def length(self) -> int:
        """L: cache lines covered by the base sequence."""
        return int(self.base.size)

    @property
    def index_bits(self) -> int:
        return self.length.bit_length() - 1

    @property
    def n_slices(self) -> int:
        return int(self.base.max()) + 1

    @property
    def valid_limit(self) -> int:
        """Addresses below this are mapped; at or above it they are refused."""
        return 1 << (self.high_bit + 1)

    def mask(self, k: int) -> int:
        return self.masks[k] if k < len(self.masks) else 0

    def rows(self) -> tuple[int, ...]:
        """The GF(2) rows of the index: bit k of the base index is parity(PA & rows[k])."""
        return tuple((1 << (LINE_BITS + k)) | self.mask(k) for k in range(self.index_bits))

    @property
    def covered_high_bit(self) -> int | None:
        """The largest h with every address below 2^(h + 1) covered (h <= high_bit); None when even the
        first aligned block (address 0) lies outside the span."""
        lowest = self.high_bit + 1
        for mask, value in self.span:
            if value or not mask:
                return None
            lowest = min(lowest, (mask & -mask).bit_length() - 1)
        return lowest - 1 if lowest > LINE_BITS else None

    def describe_range(self) -> str:
        text = (
            f"addresses below 2^{self.high_bit + 1} = {format_bytes(self.valid_limit)}, "
            f"masks on bits {self.low_bit}..{self.high_bit}"
        )
        if not self.span:
            return text
        covered = self.covered_high_bit
        return text + (
            f", and there only on the span of the measured frames ({len(self.span)} parity condition"
            f"{'s' if len(self.span) > 1 else ''}: "
            + ", ".join(f"parity(PA & 0x{m:x}) = {v}" for m, v in self.span[:4])
            + (" ..." if len(self.span) > 4 else "")
            + "); "
            + (
                f"whole range covered below 2^{covered + 1} = {format_bytes(1 << (covered + 1))}"
                if covered is not None
                else "address 0 is outside it, so the base sequence itself is not determined"
            )
        )

    def covered_model(self) -> SliceHashModel | None:
        """This model on its largest whole range [0, 2^(h+1)) (no span conditions): what tables can hold."""
        if not self.span:
            return self
        high = self.covered_high_bit
        if high is None or high < self.low_bit:  # the format needs whole base-sequence blocks
            return None
        keep = (1 << (high + 1)) - 1
        return SliceHashModel(
            name=self.name,
            base=self.base,
            masks=tuple(m & keep for m in self.masks),
            low_bit=self.low_bit,
            high_bit=high,
            source=self.source,
        )

    def covers(self, addresses: np.ndarray) -> np.ndarray:
        """Which addresses the model maps (below the range limit and in the span), as a bool array."""
        a = np.asarray(addresses, dtype=np.uint64)
        ok = a < np.uint64(self.valid_limit) if self.high_bit < 63 else np.ones(a.shape, dtype=bool)
        for mask, value in self.span:
            ok &= (np.bitwise_count(a & np.uint64(mask)) & np.uint8(1)) == value
        return ok

    # --- mapping --------------------------------------------------------------------------------------
    @cached_property
    def hash(self) -> AddressHash:
        if self.length == 1:  # one entry: every line in the one slice; keep the kernel's rows non-empty
            table = np.zeros(2, dtype=np.uint16)
            return AddressHash((1 << LINE_BITS,), table, self.high_bit, name=self.name)
        return AddressHash(self.rows(), self.base, self.high_bit, name=self.name)

    def slices(self, addresses: np.ndarray) -> np.ndarray:
        """Slice of every physical address (uint64 array); AddressRangeError for one above the range or,
        for a model with span conditions, outside the span of the frames it was inferred from."""
        out = self.hash.map(addresses)
        if self.span:
            a = np.asarray(addresses).astype(np.uint64).reshape(-1)
            for mask, value in self.span:
                bad = (np.bitwise_count(a & np.uint64(mask)) & np.uint8(1)) != value
                if bad.any():
                    pos = int(np.argmax(bad))
                    raise AddressRangeError(
                        f"physical address 0x{int(a[pos]):x} is outside the span of the frames {self.name} "
                        f"was inferred from (parity(PA & 0x{mask:x}) must be {value}): the data do not "
                        "determine its slice; refusing to map it",
                        pos,
                        int(a[pos]),
                    )
        return out


def model_problem(
    base: np.ndarray, masks: tuple[int, ...], low_bit: int, high_bit: int
) -> tuple[str, str] | None:
    """Why these tables are not a slice-hash model, or None. Shared by every loader.

    Returns (part, phrase): part is "base" (the base sequence), "bits" (LOW HIGH) or "masks".
    """
    length = int(base.size)
    if length == 0 or length & (length - 1):
        return (
            "base",
            f"the base sequence has {length} entries; expected a power of two (it covers 2^b cache lines)",
        )
    b = length.bit_length() - 1
    present = np.unique(base)
    n = int(present[-1]) + 1
    if present.size != n:
        missing = sorted(set(range(n)) - {int(v) for v in present})
        return "base", f"slice ids must be 0..{n - 1} with every id present; missing {missing[:5]}"
    if not 0 <= low_bit <= high_bit <= 63:
        return "bits", f"mask bits {low_bit}..{high_bit}: expected 0 <= lowest <= highest <= 63"
    if length > 1 and low_bit < LINE_BITS + b:
        return "bits", (
            f"lowest mask bit {low_bit} is inside the base sequence's line index "
            f"(bits 6..{LINE_BITS + b - 1}); "
            f"expected {LINE_BITS + b} or more"
        )
    allowed = ((1 << (high_bit + 1)) - 1) & ~((1 << low_bit) - 1)
    for k, m in enumerate(masks):
        if m < 0 or m >> 64:
            return "masks", f"mask {k} (0x{m:x}) is not a 64-bit value"
        if m and k >= b:
            return (
                "masks",
                f"mask {k} is 0x{m:x} but a {length}-entry base sequence has only {b} permutation bits",
            )
        if m & ~allowed:
            bad = (m & ~allowed).bit_length() - 1
            return (
                "masks",
                f"mask {k} (0x{m:x}) uses address bit {bad}, outside the declared bits {low_bit}..{high_bit}",
            )
    return None


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"
