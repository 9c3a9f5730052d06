"""Infer a slice-hash model (base sequence + masks) from measured (physical address, slice) pairs.

Two methods, both GF(2) linear algebra over the address bits; the first that explains the data wins:

- linear (power-of-two slice counts; any sample layout, scattered lines included): when the hash is
  GF(2)-linear, every slice-id bit is a parity of address bits. Slice ids are the uncore's CHA numbers,
  whose binary digits need not be the hash's output bits, so the unknowns are a labelling phi (one bit per
  slice) and a parity w of address bits with phi(slice) = w . address + c: a homogeneous linear system in
  (phi, w, c) whose null space, modulo the trivial solutions, is the hash. Wrong labels are handled by
  RANSAC: each subset holds a basis of the lines' address bits plus random lines, and a solution is kept
  when it disagrees with no more lines than the best one found plus three standard deviations.
- blocks (any slice count; needs the lines of whole aligned blocks, e.g. every line of a few dozen 2 MiB
  pages): for a trial length L = 2^b, every aligned L-line block must hold one reference block permuted
  by XOR with an offset d_j, found for all offsets at once by a Walsh-Hadamard XOR correlation (of random
  +-1 embeddings of the labels); the reference is then re-estimated by majority vote over the aligned
  blocks. The offsets must be an affine GF(2) function of the block's address bits, d_j = A h_j + c
  (solved exactly, or by RANSAC when some blocks are wrong): the rows of A are the masks and the reference
  shifted by c is the base sequence. A longer base sequence can express every shorter one, so the model
  is the shortest L that explains the lines as well as the longer ones (within three binomial standard
  errors). A base sequence with XOR symmetries (Base[i ^ t] = Base[i]) fixes offsets only modulo them:
  they are reduced to a canonical representative first, which leaves every mapped slice unchanged.

What the data cannot determine is reported, not guessed. The model (d = A h + c, or the parities of the
linear method) is fixed exactly on the affine span of the measured rows (frames/blocks/lines with a constant
1) and nowhere else: every vector of the design's null space is a parity condition parity(PA & mask) = value
that all measured rows meet, and an address that breaks one lies in a direction no measurement fixed. So the
inferred model carries those conditions (`SliceHashModel.span`) and refuses addresses outside them, and the
address bits they involve are reported as undetermined. A condition with value 1 says the frame at address 0
is not in the span (14 random frames of 512 can miss it): then not even the base sequence, the slices from
address 0, is known, and the table format, which can only say "valid below 2^(h+1)", cannot hold the model.
A fraction of the 2 MiB frames is held back and predicted by the model fit without them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tailscope.addr import gf2
from tailscope.addr.errors import AddrInputError
from tailscope.addr.model import LINE_BITS, SliceHashModel

FRAME_BITS = 21  # hold-back unit: 2 MiB frames
MAX_INDEX_BITS = 16  # the kernel's limit on base-sequence length (2^16 lines)
PROBE_BLOCKS = 8  # blocks aligned to test a trial length before aligning all
BATCH_ELEMENTS = 1 << 20  # labels per Walsh-Hadamard batch


@dataclass(frozen=True)
class InferSettings:
    max_error: float = 0.05  # fraction of wrong labels tolerated (measurement noise)
    holdout: float = 0.1  # fraction of 2 MiB frames held back to test predictions
    min_coverage: float = 0.9  # fraction of an aligned block's lines needed to use the block
    seed: int | None = None
    name: str = "inferred"

    def check(self) -> None:
        if not 0 <= self.max_error < 0.25:
            raise AddrInputError(f"--max-error {self.max_error}: expected 0 <= value < 0.25")
        if not 0 <= self.holdout < 1:
            raise AddrInputError(f"--holdout {self.holdout}: expected 0 <= value < 1")
        if not 0 < self.min_coverage <= 1:
            raise AddrInputError(f"--min-coverage {self.min_coverage}: expected 0 < value <= 1")


@dataclass(frozen=True)
class InferenceResult:
    model: SliceHashModel
    method: str  # "linear" | "blocks"
    samples: int  # samples read
    lines: int  # distinct cache lines among them
    conflicting_lines: int  # lines measured more than once with different slices
    training_lines: int
    # lines the model needed: linear, the fitting lines up to the last one (in file order) that raised the
    # rank of the address bits; blocks, the aligned blocks (in file order) that did, times L
    lines_needed: int
    blocks_used: int  # aligned blocks used (blocks method)
    training_disagreements: int  # training lines the model maps to another slice (wrong labels)
    held_back: int
    held_back_correct: int
    held_back_outside: int  # held-back lines outside the model's valid range or span (not predicted)
    top_data_bit: int  # highest address bit set in the training data
    undetermined_bits: tuple[int, ...]  # bits <= top_data_bit the data cannot separate (in span conditions)
    symmetries: tuple[int, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def held_back_accuracy(self) -> float | None:
        predicted = self.held_back - self.held_back_outside
        return self.held_back_correct / predicted if predicted else None


@dataclass
class _Fit:
    model: SliceHashModel  # valid on the span of the measured rows (span conditions)
    full: SliceHashModel  # the same fit to the data's top bit (undetermined directions set to 0)
    method: str
    design_rows: np.ndarray  # packed address rows (with a constant bit) whose span decides determinacy
    design_first_bit: int  # address bit of the rows' bit 0 (the constant sits just below it)
    lines_needed: int  # training lines that already determine the model (see InferenceResult)
    blocks_used: int = 0
    symmetries: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)


# --- entry point -----------------------------------------------------------------------------------------
def infer(
    addresses: np.ndarray, slices: np.ndarray, settings: InferSettings | None = None
) -> InferenceResult:
    settings = settings or InferSettings()
    settings.check()
    rng = np.random.default_rng(settings.seed)
    addresses = np.asarray(addresses, dtype=np.uint64)
    slices = np.asarray(slices, dtype=np.int64)
    if addresses.size == 0:
        raise AddrInputError("no samples: expected (address, slice) pairs")
    lines, labels, first_seen, conflicting = _unique_lines(addresses >> np.uint64(LINE_BITS), slices)
    n = int(labels.max()) + 1
    missing = sorted(set(range(n)) - {int(s) for s in np.unique(labels)})
    if missing:
        raise AddrInputError(
            f"the samples never show slice {missing[0]} of 0..{n - 1}: slice ids must be the CHA numbers "
            "0..n-1 and every slice must occur (measure more lines)"
        )
    held = _hold_back(lines, settings.holdout, rng)
    train = ~held
    order = np.argsort(first_seen[train], kind="stable")  # training lines in file order
    t_lines, t_labels = lines[train][order], labels[train][order]
    top = int(t_lines.max()).bit_length() - 1 + LINE_BITS if t_lines.max() else LINE_BITS

    fit = None
    attempts: list[str] = []
    if n & (n - 1) == 0 and n > 1:
        fit = _fit_linear(t_lines, t_labels, n, top, settings, rng, attempts)
    if fit is None:
        fit = _fit_blocks(t_lines, t_labels, n, top, settings, rng, attempts)
    if fit is None:
        raise AddrInputError("cannot infer a slice-hash model: " + "; ".join(attempts))

    model = fit.model
    disagreements = int(np.count_nonzero(fit.full.slices(t_lines << np.uint64(LINE_BITS)) != t_labels))
    h_lines, h_labels = lines[held], labels[held]
    h_in = model.covers(h_lines << np.uint64(LINE_BITS))
    h_pred = model.slices(h_lines[h_in] << np.uint64(LINE_BITS))
    undetermined = _undetermined_bits(fit.design_rows, fit.design_first_bit, top)
    notes = list(fit.notes)
    outside = int(np.count_nonzero(~model.covers(t_lines << np.uint64(LINE_BITS))))
    if outside:  # cannot happen for rows of the design; said rather than hidden if it does
        notes.append(f"{outside} fitting lines lie outside the model's span (they were left out of the fit)")
    return InferenceResult(
        model=model,
        method=fit.method,
        samples=int(addresses.size),
        lines=int(lines.size),
        conflicting_lines=conflicting,
        training_lines=int(t_lines.size),
        lines_needed=fit.lines_needed,
        blocks_used=fit.blocks_used,
        training_disagreements=disagreements,
        held_back=int(h_lines.size),
        held_back_correct=int(np.count_nonzero(h_pred == h_labels[h_in])),
        held_back_outside=int(np.count_nonzero(~h_in)),
        top_data_bit=top,
        undetermined_bits=undetermined,
        symmetries=fit.symmetries,
        notes=tuple(notes),
    )


def _unique_lines(lines: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """One label per line (the majority; ties dropped), the first sample index of each line, and the
    number of lines with disagreeing samples."""
    position = np.arange(lines.size)
    order = np.lexsort((labels, lines))
    sl, sy, sp = lines[order], labels[order], position[order]
    new_pair = np.r_[True, (sl[1:] != sl[:-1]) | (sy[1:] != sy[:-1])]
    pair_start = np.flatnonzero(new_pair)
    pair_count = np.diff(np.r_[pair_start, sl.size])
    pair_line, pair_label = sl[pair_start], sy[pair_start]
    pair_first = np.minimum.reduceat(sp, pair_start)
    new_line = np.r_[True, pair_line[1:] != pair_line[:-1]]
    line_start = np.flatnonzero(new_line)
    group = np.cumsum(new_line) - 1
    pairs_per_line = np.diff(np.r_[line_start, pair_line.size])
    best = np.maximum.reduceat(pair_count, line_start)
    is_best = pair_count == best[group]
    n_best = np.bincount(group, weights=is_best, minlength=line_start.size)
    chosen = np.flatnonzero(is_best)
    chosen = chosen[np.r_[True, group[chosen][1:] != group[chosen][:-1]]]  # first best pair of each line
    keep = n_best[group[chosen]] == 1  # a tie between labels: the line is dropped
    first = np.minimum.reduceat(pair_first, line_start)
    conflicting = int(np.count_nonzero(pairs_per_line > 1))
    sel = chosen[keep]
    return pair_line[sel], pair_label[sel], first[group[sel]], conflicting


def _hold_back(lines: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    frames = lines >> np.uint64(FRAME_BITS - LINE_BITS)
    unique = np.unique(frames)
    count = round(fraction * unique.size)
    if fraction <= 0 or unique.size < 2 or count == 0:
        return np.zeros(lines.size, dtype=bool)
    chosen = rng.choice(unique, size=min(count, unique.size - 1), replace=False)
    return np.isin(frames, chosen)


def _undetermined_bits(design_rows: np.ndarray, first_bit: int, top: int) -> tuple[int, ...]:
    """Address bits first_bit..top on which some direction the data never vary depends.

    design_rows are packed rows with bit 0 = constant, bit j + 1 = address bit first_bit + j.
    """
    width = top - first_bit + 1
    if width <= 0:
        return ()
    basis, _ = gf2.rank_prefix(design_rows)
    matrix = gf2.bits_matrix(basis, width + 1) if basis.size else np.zeros((0, width + 1), dtype=bool)
    null = gf2.null_space(matrix)
    support = null[:, 1:].any(axis=0)
    return tuple(first_bit + int(j) for j in np.flatnonzero(support))


def _span(design_rows: np.ndarray, first_bit: int, top: int, notes: list[str]) -> tuple[tuple[int, int], ...]:
    """The parity conditions (mask, value) that every measured row meets: the design's null space.

    An address meets them all iff its row is in the affine span of the measured rows, where the fit is
    exact. Reduced so that at most one condition has value 1 (the constant is the first pivot).
    """
    width = top - first_bit + 1
    if width <= 0:
        return ()
    basis, _ = gf2.rank_prefix(design_rows)
    matrix = gf2.bits_matrix(basis, width + 1) if basis.size else np.zeros((0, width + 1), dtype=bool)
    null = gf2.null_space(matrix)
    if not null.shape[0]:
        return ()
    reduced = gf2.row_basis(null)
    conditions = tuple(
        (int(gf2.pack_rows(row[1:][None, :], first_bit=first_bit)[0]), int(row[0])) for row in reduced
    )
    undetermined = _undetermined_bits(design_rows, first_bit, top)
    zero_outside = any(value for _, value in conditions)
    notes.append(
        f"the data do not determine address bit{'s' if len(undetermined) > 1 else ''} "
        f"{_bit_list(undetermined)} (never varied independently): the model holds only on the span of the "
        f"measured frames ({len(conditions)} parity condition{'s' if len(conditions) > 1 else ''}) "
        "and refuses other addresses"
        + (
            "; the frame at address 0 is outside that span, so the base sequence is not determined and the "
            "table format cannot hold the model (measure more frames)"
            if zero_outside
            else ""
        )
    )
    return conditions


def _bit_list(bits: tuple[int, ...] | list[int]) -> str:
    parts: list[str] = []
    start = prev = None
    for b in [*bits, None]:
        if b is not None and prev is not None and b == prev + 1:
            prev = b
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = b
    return ", ".join(parts)


def _design(lines: np.ndarray, drop_bits: int) -> np.ndarray:
    """Packed design rows: bit 0 constant 1, bit j + 1 = bit j of (line >> drop_bits)."""
    return ((lines >> np.uint64(drop_bits)) << np.uint64(1)) | np.uint64(1)


# --- linear method ---------------------------------------------------------------------------------------
def _fit_linear(
    lines: np.ndarray,
    labels: np.ndarray,
    n: int,
    top: int,
    settings: InferSettings,
    rng: np.random.Generator,
    attempts: list[str],
) -> _Fit | None:
    r = n.bit_length() - 1
    m = top - LINE_BITS + 1  # address bits 6..top
    if m + 1 > 64 or m <= 0:
        attempts.append("linear: addresses too wide")
        return None
    cols = n + m + 1
    need = 1.0 - settings.max_error
    one = np.uint64(1)
    design = _design(lines, 0)
    # trivial solutions: (phi = 0, w, c) with w . x + c = 0 on all lines, and (phi = 1, 0, c = 1)
    basis, _ = gf2.rank_prefix(design)
    dep = gf2.null_space(gf2.bits_matrix(basis, m + 1)) if basis.size else np.eye(m + 1, dtype=bool)
    trivial = np.zeros((dep.shape[0] + 1, cols), dtype=bool)
    trivial[:-1, n : n + m] = dep[:, 1:]
    trivial[:-1, n + m] = dep[:, 0]
    trivial[-1, :n] = True
    trivial[-1, n + m] = True
    base_rank = gf2.rank(trivial)
    # Each subset holds a basis of the address rows (so its null space holds only relations of the data,
    # whatever few lines carry the high bits) plus random lines; drawn from a pool of lines that keeps
    # every rank-raising line of the data.
    pool = np.union1d(
        gf2.independent_rows(design), rng.choice(lines.size, min(lines.size, 20000), replace=False)
    )
    extra = n + 32
    good: list[np.ndarray] = []
    wrong: list[int] = []
    found = 0
    for _ in range(40):
        order = rng.permutation(pool)
        rows = order[gf2.independent_rows(design[order])]
        rest = np.setdiff1d(pool, rows)
        rows = np.concatenate([rows, rng.choice(rest, size=min(extra, rest.size), replace=False)])
        system = np.zeros((rows.size, cols), dtype=bool)
        system[np.arange(rows.size), labels[rows]] = True
        system[:, n : n + m] = gf2.bits_matrix(lines[rows], m)
        system[:, n + m] = True
        for vector in gf2.null_space(system):
            phi, w, c = vector[:n], gf2.pack_rows(vector[n : n + m])[0], bool(vector[n + m])
            if not phi.any() or phi.all():
                continue
            parity = (np.bitwise_count(lines & w) & one).astype(bool)
            misses = int(np.count_nonzero(phi[labels] ^ parity ^ c))
            if misses <= (1.0 - need) * lines.size:
                good.append(vector)
                wrong.append(misses)
        if good:
            # every true parity disagrees only where a label is wrong: keep those near the best
            best = min(wrong)
            slack = 3.0 * np.sqrt(max(best, 1.0)) + 1.0
            keep = [i for i, w_ in enumerate(wrong) if w_ <= best + slack]
            good = [good[i] for i in keep]
            wrong = [wrong[i] for i in keep]
            found = gf2.rank(np.vstack([trivial, *good])) - base_rank
        if found >= r:
            break
    # r vectors independent modulo the trivial ones
    chosen: list[np.ndarray] = []
    current = trivial
    for vector in good:
        stacked = np.vstack([current, vector])
        if gf2.rank(stacked) > gf2.rank(current):
            chosen.append(vector)
            current = stacked
        if len(chosen) == r:
            break
    phis = np.array([v[:n] for v in chosen])  # r x n
    codes = gf2.pack_rows(phis.T)  # code of each slice
    if np.unique(codes).size != n:
        attempts.append("linear: the parities found do not tell every slice apart")
        return None
    w = np.array([v[n : n + m] for v in chosen])  # r x m, column j = address bit 6 + j
    c = np.array([v[n + m] for v in chosen])
    notes: list[str] = []
    span = _span(design, LINE_BITS, top, notes)
    # b' low line bits must already reach every code: index = low(x) ^ A hi(x), code = W_low index ^ c
    for bprime in range(r, min(MAX_INDEX_BITS, w.shape[1]) + 1):
        if gf2.rank(w[:, :bprime]) == r:
            break
    else:
        attempts.append(
            "linear: the slice bits do not depend on the low line bits enough for the table format"
        )
        return None
    w_low, w_high = w[:, :bprime], w[:, bprime:]
    right = gf2.right_inverse(w_low)
    if right is None:
        attempts.append("linear: no right inverse of the low-bit part")
        return None
    a = gf2.matmul(right, w_high) if w_high.size else np.zeros((bprime, 0), dtype=bool)  # bprime x hi bits
    slice_of_code = np.empty(n, dtype=np.int64)
    slice_of_code[codes.astype(np.int64)] = np.arange(n)
    index = np.arange(1 << bprime, dtype=np.uint64)
    code = gf2.pack_rows(gf2.matmul(gf2.bits_matrix(index, bprime), w_low.T) ^ c[None, :])
    base = slice_of_code[code.astype(np.int64)]
    low_bit = LINE_BITS + bprime
    masks = tuple(
        int(gf2.pack_rows(a[k][None, :], first_bit=low_bit)[0]) if a.shape[1] else 0 for k in range(bprime)
    )
    full = SliceHashModel(
        name=settings.name, base=base, masks=masks, low_bit=low_bit, high_bit=top, source="inferred"
    )
    _, needed = gf2.rank_prefix(design)
    return _Fit(_with_span(full, span), full, "linear", design, LINE_BITS, int(needed), notes=notes)


# --- blocks method ---------------------------------------------------------------------------------------
def _fit_blocks(
    lines: np.ndarray,
    labels: np.ndarray,
    n: int,
    top: int,
    settings: InferSettings,
    rng: np.random.Generator,
    attempts: list[str],
) -> _Fit | None:
    need = 1.0 - settings.max_error
    align_need = 1.0 - 3 * settings.max_error
    reasons: list[str] = []
    fits: list[tuple[float, int, _Fit]] = []
    for b in range(0, MAX_INDEX_BITS + 1):
        length = 1 << b
        block_id = lines >> np.uint64(b)
        ids, first, inverse, counts = np.unique(
            block_id, return_index=True, return_inverse=True, return_counts=True
        )
        usable = counts >= settings.min_coverage * length
        if np.count_nonzero(usable) < 2:
            if b > 0 and not reasons:
                reasons.append(
                    f"fewer than 2 aligned blocks of {length} lines are measured to "
                    f"{settings.min_coverage:.0%}"
                )
            continue
        keep = usable[inverse]
        kept_ids = ids[usable]
        row = np.searchsorted(kept_ids, block_id[keep])
        matrix = np.full((kept_ids.size, length), -1, dtype=np.int32)
        matrix[row, (lines[keep] & np.uint64(length - 1)).astype(np.int64)] = labels[keep]
        present = (matrix >= 0).sum(axis=1)
        ref = int(np.argmax(present))
        # quick test on a few blocks before aligning them all
        others = np.delete(np.arange(kept_ids.size), ref)
        probe = rng.choice(others, size=min(PROBE_BLOCKS, others.size), replace=False)
        _, agreement = _align(matrix[ref], matrix[probe], n, rng)
        if np.mean(agreement >= align_need) < 0.75:
            continue
        # align, re-estimate the reference by majority vote, re-align the blocks that then disagree
        offsets, _ = _align(matrix[ref], matrix, n, rng)
        reference = _majority(matrix, offsets, n, length, matrix[ref])
        agreement = gf2.agreement_at(reference, matrix, offsets)
        redo = np.flatnonzero(agreement < align_need)
        if redo.size:
            offsets[redo], agreement[redo] = _align(reference, matrix[redo], n, rng)
        aligned = agreement >= align_need
        if np.mean(aligned) < 0.9:
            reasons.append(
                f"at L = {length} only {np.mean(aligned):.0%} of {aligned.size} blocks are XOR permutations "
                "of one block"
            )
            continue
        if (reference < 0).any():
            reasons.append(
                f"at L = {length} the blocks leave {int((reference < 0).sum())} base entries unmeasured"
            )
            continue
        fit = _fit_offsets(reference, offsets[aligned], kept_ids[aligned], b, n, top, settings, rng)
        if fit is None:
            reasons.append(
                f"at L = {length} the block offsets are not an affine function of the address bits"
            )
            continue
        model, full, (design, span_design), notes, symmetries = fit
        explained = float(np.mean(full.slices(lines << np.uint64(LINE_BITS)) == labels))
        if explained < need:
            reasons.append(f"at L = {length} the model explains only {explained:.1%} of the lines")
            continue
        # lines needed: the aligned blocks, in file order of their first line, that reach the final rank
        in_file_order = np.argsort(first[usable][aligned], kind="stable")
        _, blocks_needed = gf2.rank_prefix(design[in_file_order])
        if int(np.count_nonzero(~aligned)):
            notes.append(
                f"{int(np.count_nonzero(~aligned))} of {aligned.size} blocks did not align and were left out"
            )
        fits.append(
            (
                explained,
                int(lines.size),
                _Fit(
                    model,
                    full,
                    "blocks",
                    span_design,
                    LINE_BITS + b,
                    int(blocks_needed * length),
                    blocks_used=int(np.count_nonzero(aligned)),
                    symmetries=symmetries,
                    notes=notes,
                ),
            )
        )
        # a longer base sequence can express every shorter one, so the fit only grows with L: once two
        # longer lengths add nothing, the shortest length that fits as well as the best is the model
        if len(fits) >= 3 and max(f[0] for f in fits[-2:]) <= fits[-3][0] + _tolerance(*fits[-3][:2]):
            break
    if fits:
        best = max(f[0] for f in fits)
        for explained, count, candidate in fits:
            if explained >= best - _tolerance(best, count):
                return candidate
    attempts.append("blocks: " + ("; ".join(reasons[-3:]) if reasons else "no trial length L fits"))
    return None


def _tolerance(explained: float, count: int) -> float:
    """How much less of the data a shorter model may explain and still count as fitting as well: three
    binomial standard errors, at least 0.1%."""
    return max(0.001, 3.0 * float(np.sqrt(max(explained * (1.0 - explained), 1e-6) / max(count, 1))))


def _align(
    reference: np.ndarray, blocks: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Best XOR offset of every block against the reference and the fraction of the lines present in both
    that agree there."""
    length = reference.size
    offsets = np.zeros(blocks.shape[0], dtype=np.int64)
    batch = max(1, BATCH_ELEMENTS // max(length, 1))
    for start in range(0, blocks.shape[0], batch):
        offsets[start : start + batch] = gf2.best_xor_offsets(
            reference, blocks[start : start + batch], n, rng
        )
    return offsets, gf2.agreement_at(reference, blocks, offsets)


def _majority(
    matrix: np.ndarray, offsets: np.ndarray, n: int, length: int, fallback: np.ndarray
) -> np.ndarray:
    """reference[k] = the most common label of matrix[j, k ^ offsets[j]] over all blocks j."""
    k = np.arange(length)
    shifted = matrix[np.arange(matrix.shape[0])[:, None], k[None, :] ^ offsets[:, None]]
    valid = shifted >= 0
    votes = np.bincount(
        (np.broadcast_to(k, shifted.shape)[valid] * n + shifted[valid]).astype(np.int64), minlength=length * n
    ).reshape(length, n)
    out = np.where(votes.sum(axis=1) > 0, votes.argmax(axis=1), fallback)
    return out.astype(np.int32)


def _reduce(values: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """Canonical representatives modulo the span of `basis` (packed, distinct highest bits, descending)."""
    v = np.asarray(values, dtype=np.uint64).copy()
    one = np.uint64(1)
    for row in basis:
        p = np.uint64(int(row).bit_length() - 1)
        v[((v >> p) & one) == one] ^= row
    return v


def _fit_offsets(
    reference: np.ndarray,
    offsets: np.ndarray,
    block_ids: np.ndarray,
    b: int,
    n: int,
    top: int,
    settings: InferSettings,
    rng: np.random.Generator,
) -> tuple[SliceHashModel, SliceHashModel, tuple[np.ndarray, np.ndarray], list[str], tuple[int, ...]] | None:
    length = 1 << b
    notes: list[str] = []
    agree = gf2.xor_agreement(reference, reference[None, :], n)[0]
    symmetries = tuple(int(t) for t in np.flatnonzero(agree == length) if t)
    sym_basis, _ = (
        gf2.rank_prefix(np.array(symmetries, dtype=np.uint64)) if symmetries else (np.zeros(0, np.uint64), 0)
    )
    d = _reduce(offsets.astype(np.uint64), sym_basis)
    if symmetries:
        notes.append(
            f"the base sequence has XOR symmetries {', '.join(str(t) for t in symmetries[:7])}"
            f"{' ...' if len(symmetries) > 7 else ''}: masks are determined only modulo them (the map is not)"
        )
    width = max(top - (LINE_BITS + b) + 1, 0)  # block-id bits
    design = _design(block_ids, 0)
    x = (
        np.hstack([np.ones((block_ids.size, 1), dtype=bool), gf2.bits_matrix(block_ids, width)])
        if width
        else np.ones((block_ids.size, 1), dtype=bool)
    )
    target = gf2.bits_matrix(d, b) if b else np.zeros((block_ids.size, 0), dtype=bool)
    solution = (
        _robust_solve(x, target, 1.0 - 3 * settings.max_error, rng)
        if b
        else np.zeros((x.shape[1], 0), dtype=bool)
    )
    if solution is None:
        return None
    c = int(gf2.pack_rows(solution[0][None, :])[0]) if b else 0
    # the solution is fixed only on the span of the blocks it fits (RANSAC may have left some out)
    fitted = (gf2.matmul(x, solution) == target).all(axis=1) if b else np.ones(block_ids.size, dtype=bool)
    span_design = design if fitted.all() else _design(block_ids[fitted], 0)
    span = _span(span_design, LINE_BITS + b, top, notes)
    low_bit = LINE_BITS + b
    a = solution[1:].T  # b x block-id bits
    masks = tuple(int(gf2.pack_rows(a[k][None, :], first_bit=low_bit)[0]) if width else 0 for k in range(b))
    base = reference[np.arange(length) ^ c]
    full = SliceHashModel(
        name=settings.name,
        base=base,
        masks=masks,
        low_bit=low_bit,
        high_bit=max(top, low_bit),
        source="inferred",
    )
    return _with_span(full, span), full, (design, span_design), notes, symmetries


def _with_span(model: SliceHashModel, span: tuple[tuple[int, int], ...]) -> SliceHashModel:
    """The model restricted to the span of the measured rows."""
    return SliceHashModel(
        name=model.name,
        base=model.base,
        masks=model.masks,
        low_bit=model.low_bit,
        high_bit=model.high_bit,
        source=model.source,
        span=span,
    )


def _robust_solve(
    x: np.ndarray, target: np.ndarray, need: float, rng: np.random.Generator
) -> np.ndarray | None:
    """S with x @ S = target on >= need of the rows: exact when consistent, else RANSAC over row subsets."""
    exact = gf2.solve(x, target)
    if exact is not None:
        return exact
    rows, cols = x.shape
    size = min(rows, cols + 8)
    best, best_score = None, -1.0
    for _ in range(200):
        pick = rng.choice(rows, size=size, replace=False)
        s = gf2.solve(x[pick], target[pick])
        if s is None:
            continue
        score = float(np.mean((gf2.matmul(x, s) == target).all(axis=1)))
        if score > best_score:
            best, best_score = s, score
        if score >= need:
            break
    if best is None or best_score < need:
        return None
    inliers = (gf2.matmul(x, best) == target).all(axis=1)
    return gf2.solve(x[inliers], target[inliers]) if inliers.any() else best
