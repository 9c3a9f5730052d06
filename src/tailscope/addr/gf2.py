"""Linear algebra over GF(2) on boolean numpy matrices, and the XOR correlation of label sequences.

Rows are equations or vectors; columns are variables (address bits). Elimination XORs whole rows at once,
so a matrix of a few thousand rows and a hundred columns reduces in milliseconds.
"""

from __future__ import annotations

import numpy as np


def bits_matrix(values: np.ndarray, width: int, *, first_bit: int = 0) -> np.ndarray:
    """Boolean matrix whose row i holds bits first_bit .. first_bit + width - 1 of values[i]."""
    v = np.asarray(values, dtype=np.uint64).reshape(-1)
    shifts = np.arange(first_bit, first_bit + width, dtype=np.uint64)
    return ((v[:, None] >> shifts[None, :]) & np.uint64(1)).astype(bool)


def pack_rows(matrix: np.ndarray, *, first_bit: int = 0) -> np.ndarray:
    """Inverse of bits_matrix for widths up to 64: row i -> sum of 2^(first_bit + j) over its set bits."""
    m = np.atleast_2d(np.asarray(matrix, dtype=bool))
    weights = np.uint64(1) << np.arange(first_bit, first_bit + m.shape[1], dtype=np.uint64)
    return (m.astype(np.uint64) * weights[None, :]).sum(axis=1, dtype=np.uint64)


def rref(matrix: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Reduced row echelon form and the pivot columns (the rows beyond len(pivots) are zero)."""
    m = np.array(matrix, dtype=bool, copy=True)
    rows, cols = m.shape
    pivots: list[int] = []
    r = 0
    for c in range(cols):
        if r == rows:
            break
        candidates = np.flatnonzero(m[r:, c])
        if candidates.size == 0:
            continue
        p = r + int(candidates[0])
        if p != r:
            m[[r, p]] = m[[p, r]]
        hit = m[:, c].copy()
        hit[r] = False
        m[hit] ^= m[r]
        pivots.append(c)
        r += 1
    return m, pivots


def rank(matrix: np.ndarray) -> int:
    m = np.atleast_2d(np.asarray(matrix, dtype=bool))
    if m.size == 0:
        return 0
    return len(rref(m)[1])


def row_basis(matrix: np.ndarray) -> np.ndarray:
    m = np.atleast_2d(np.asarray(matrix, dtype=bool))
    if m.size == 0:
        return np.zeros((0, m.shape[1] if m.ndim == 2 else 0), dtype=bool)
    reduced, pivots = rref(m)
    return reduced[: len(pivots)]


def null_space(matrix: np.ndarray) -> np.ndarray:
    """Basis (rows) of {x : matrix @ x = 0}."""
    m = np.atleast_2d(np.asarray(matrix, dtype=bool))
    cols = m.shape[1]
    reduced, pivots = rref(m) if m.shape[0] else (m, [])
    free = [c for c in range(cols) if c not in set(pivots)]
    basis = np.zeros((len(free), cols), dtype=bool)
    for i, f in enumerate(free):
        basis[i, f] = True
        for r, p in enumerate(pivots):
            basis[i, p] = reduced[r, f]
    return basis


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """One X with a @ X = b (a: r x c, b: r x k), or None when inconsistent. Free variables are 0."""
    a = np.atleast_2d(np.asarray(a, dtype=bool))
    b = np.asarray(b, dtype=bool).reshape(a.shape[0], -1)
    cols = a.shape[1]
    reduced, pivots = rref(np.hstack([a, b]))
    pivots_a = [p for p in pivots if p < cols]
    if len(pivots_a) != len(pivots):  # a pivot in b's columns: 0 = 1
        return None
    x = np.zeros((cols, b.shape[1]), dtype=bool)
    for r, p in enumerate(pivots_a):
        x[p] = reduced[r, cols:]
    return x


def in_row_space(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """For each row of `vectors`: is it a combination of matrix's rows?"""
    basis = row_basis(matrix)
    v = np.atleast_2d(np.asarray(vectors, dtype=bool))
    r = basis.shape[0]
    return np.array([rank(np.vstack([basis, row])) == r for row in v], dtype=bool)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b over GF(2)."""
    return (np.asarray(a, dtype=np.int64) @ np.asarray(b, dtype=np.int64)) & 1 == 1


def right_inverse(a: np.ndarray) -> np.ndarray | None:
    """R with a @ R = I for a full-row-rank a (r x c, r <= c); None when a is not of full row rank."""
    a = np.atleast_2d(np.asarray(a, dtype=bool))
    return solve(a, np.eye(a.shape[0], dtype=bool))


# --- Walsh-Hadamard transform: XOR correlation of label sequences ----------------------------------------
def fwht(values: np.ndarray) -> np.ndarray:
    """Walsh-Hadamard transform along the last axis (length a power of two), unnormalised, float64."""
    a = np.array(values, dtype=np.float64, copy=True)
    n = a.shape[-1]
    lead = a.shape[:-1]
    out = np.empty_like(a)
    h = 1
    while h < n:
        v = a.reshape(*lead, n // (2 * h), 2, h)
        w = out.reshape(*lead, n // (2 * h), 2, h)
        np.add(v[..., 0, :], v[..., 1, :], out=w[..., 0, :])
        np.subtract(v[..., 0, :], v[..., 1, :], out=w[..., 1, :])
        a, out = out, a
        h *= 2
    return a


def xor_agreement(reference: np.ndarray, blocks: np.ndarray, n_labels: int) -> np.ndarray:
    """agree[j, d] = #{i : blocks[j, i] == reference[i ^ d] >= 0} for every offset d (labels < 0: missing).

    Exact (integer-valued float64): one transform per label for the blocks, one inverse per block.
    """
    ref = np.asarray(reference)
    blk = np.atleast_2d(np.asarray(blocks))
    length = ref.size
    ref_hat = fwht(np.stack([(ref == s) for s in range(n_labels)]).astype(np.float64))  # (n, L)
    total = np.zeros((blk.shape[0], length))
    for s in range(n_labels):
        total += fwht((blk == s).astype(np.float64)) * ref_hat[s][None, :]
    return np.rint(fwht(total) / length)


# --- packed rows (width <= 64): rank over many rows, in order ------------------------------------------
def rank_prefix(rows: np.ndarray, *, chunk: int = 1 << 16) -> tuple[np.ndarray, int]:
    """Row basis of packed uint64 rows (as packed values, pivot = highest bit) and the smallest k such that
    rows[:k] already span the same space (how many rows, in order, the data needed)."""
    basis, pivots = _eliminate(rows, chunk)
    return basis, (int(pivots[-1]) + 1 if pivots.size else 0)


def independent_rows(rows: np.ndarray, *, chunk: int = 1 << 16) -> np.ndarray:
    """Positions of the rows that raise the rank when taken in order (a basis drawn from the rows)."""
    return _eliminate(rows, chunk)[1]


def _eliminate(rows: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(rows, dtype=np.uint64).reshape(-1)
    basis: dict[int, np.uint64] = {}
    positions: list[int] = []
    one = np.uint64(1)
    for start in range(0, v.size, chunk):
        part = v[start : start + chunk].copy()
        for p in sorted(basis, reverse=True):
            part[((part >> np.uint64(p)) & one) == one] ^= basis[p]
        nonzero = np.flatnonzero(part)
        while nonzero.size:
            i = int(nonzero[0])
            row = part[i]
            p = int(row).bit_length() - 1
            basis[p] = row
            positions.append(start + i)
            part[((part >> np.uint64(p)) & one) == one] ^= row
            nonzero = np.flatnonzero(part)
    packed = np.array([basis[p] for p in sorted(basis, reverse=True)], dtype=np.uint64)
    return packed, np.array(positions, dtype=np.int64)


def best_xor_offsets(
    reference: np.ndarray, blocks: np.ndarray, n_labels: int, rng: np.random.Generator, *, dims: int = 8
) -> np.ndarray:
    """For every block j, the offset d maximising #{i : blocks[j, i] == reference[i ^ d]} (labels < 0:
    missing), by XOR correlation of random +-1 label embeddings (`dims` transforms instead of one per
    label; the true offset stands out by ~dims * L against noise of ~sqrt(dims * L))."""
    ref = np.asarray(reference)
    blk = np.atleast_2d(np.asarray(blocks))
    length = ref.size
    codes = rng.choice(np.array([-1.0, 1.0]), size=(n_labels + 1, dims))
    codes[n_labels] = 0.0  # missing labels contribute nothing
    ref_codes = codes[np.where(ref >= 0, ref, n_labels)]  # (L, dims)
    blk_codes = codes[np.where(blk >= 0, blk, n_labels)]  # (J, L, dims)
    total = np.zeros((blk.shape[0], length))
    for k in range(dims):
        total += fwht(blk_codes[:, :, k]) * fwht(ref_codes[:, k])[None, :]
    return np.argmax(fwht(total), axis=1)


def agreement_at(reference: np.ndarray, blocks: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Fraction of the lines present in both that agree, blocks[j, i] vs reference[i ^ offsets[j]]."""
    blk = np.atleast_2d(np.asarray(blocks))
    shifted = np.asarray(reference)[np.arange(blk.shape[1])[None, :] ^ np.asarray(offsets)[:, None]]
    both = (blk >= 0) & (shifted >= 0)
    return (both & (blk == shifted)).sum(axis=1) / np.maximum(both.sum(axis=1), 1)
