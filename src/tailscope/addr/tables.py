"""Slice-hash table files (`BaseSequence_*.tbl`, `PermSelectMasks_*.tbl`) and the built-in models.

Format (McCalpin, Intel_Address_Hash/Results/README; copy in `tables/README.md`):
- base sequence: one decimal slice id per line, for the cache lines from physical address 0;
  its length L is a power of two.
- masks: line 1 `LOW HIGH` (decimal: lowest and highest address bit the masks use; valid for addresses
  below 2^(HIGH + 1)); line 2: hexadecimal masks separated by blanks, permutation bit 0 first (the files
  carry 14; any count is read, missing ones are 0, and masks beyond log2(L) must be 0).
Every problem is reported as `FILE:LINE: what was expected`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tailscope.addr.errors import AddrInputError
from tailscope.addr.model import LINE_BITS, SliceHashModel, model_problem
from tailscope.addr.table_names import (
    BASE_PREFIX,
    MASKS_PREFIX,
    SUFFIX,
    builtin_dir,
    builtin_names,
    table_stem,
)

MASKS_WRITTEN = 14  # the format's mask count (more when a base sequence needs more permutation bits)

_DECIMAL = re.compile(r"\d+")
_HEX = re.compile(r"(0[xX])?[0-9a-fA-F]+")


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AddrInputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AddrInputError(f"{path}: cannot read ({exc})") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():  # trailing blank lines end the table
        lines.pop()
    return lines


def read_base_sequence(path: Path) -> np.ndarray:
    lines = _lines(path)
    if not lines:
        raise AddrInputError(f"{path}: empty; expected one decimal slice id per line")
    values = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not _DECIMAL.fullmatch(text) or int(text) > 0xFFFF:
            raise AddrInputError(f"{path}:{number}: expected a slice id (decimal 0..65535), got {text!r}")
        values.append(int(text))
    return np.array(values, dtype=np.uint16)


def read_masks(path: Path) -> tuple[int, int, tuple[int, ...]]:
    """(low_bit, high_bit, masks) of a PermSelectMasks file."""
    lines = _lines(path)
    if len(lines) < 2:
        raise AddrInputError(
            f"{path}:{len(lines) + 1}: expected two lines: 'LOW HIGH' bits, then the hexadecimal masks"
        )
    fields = lines[0].split()
    if len(fields) != 2 or not all(_DECIMAL.fullmatch(f) for f in fields):
        raise AddrInputError(
            f"{path}:1: expected the lowest and highest mask bit as two decimal numbers, got {lines[0]!r}"
        )
    low, high = int(fields[0]), int(fields[1])
    if not low <= high <= 63:
        raise AddrInputError(f"{path}:1: mask bits {low}..{high}: expected lowest <= highest <= 63")
    words = lines[1].split()
    if not words:
        raise AddrInputError(
            f"{path}:2: expected hexadecimal masks, permutation bit 0 first; the line is empty"
        )
    masks = []
    for word in words:
        if not _HEX.fullmatch(word) or len(word.lower().removeprefix("0x")) > 16:
            raise AddrInputError(f"{path}:2: expected a 64-bit hexadecimal mask, got {word!r}")
        masks.append(int(word, 16))
    for number, line in enumerate(lines[2:], 3):
        if line.strip():
            raise AddrInputError(
                f"{path}:{number}: unexpected content after the masks line: {line.strip()!r}"
            )
    return low, high, tuple(masks)


def load_model(base_path: Path, masks_path: Path, *, name: str | None = None) -> SliceHashModel:
    """A model from its two table files; any inconsistency is an AddrInputError naming the file."""
    base_path, masks_path = Path(base_path), Path(masks_path)
    base = read_base_sequence(base_path)
    low, high, masks = read_masks(masks_path)
    problem = model_problem(base, masks, low, high)
    if problem:
        part, phrase = problem
        where = {"base": str(base_path), "bits": f"{masks_path}:1", "masks": f"{masks_path}:2"}[part]
        raise AddrInputError(f"{where}: {phrase}")
    return SliceHashModel(
        name=name or table_stem(base_path) or base_path.stem,
        base=base,
        masks=masks,
        low_bit=low,
        high_bit=high,
        source=f"{base_path} + {masks_path}",
    )


def write_tables(model: SliceHashModel, directory: Path, stem: str) -> tuple[Path, Path]:
    """Write `BaseSequence_<stem>.tbl` and `PermSelectMasks_<stem>.tbl`; they load back as `model`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    base_path = directory / f"{BASE_PREFIX}{stem}{SUFFIX}"
    masks_path = directory / f"{MASKS_PREFIX}{stem}{SUFFIX}"
    base_path.write_text("".join(f"{int(v)}\n" for v in model.base))
    count = max(MASKS_WRITTEN, model.index_bits)
    masks = " ".join(f"0x{model.mask(k):x}" for k in range(count))
    masks_path.write_text(f"{model.low_bit} {model.high_bit}\n{masks}\n")
    return base_path, masks_path


# --- built-in models -----------------------------------------------------------------------------------
def builtin_model(name: str) -> SliceHashModel:
    """A built-in model by name: `SKX_24-slice`, `SKX_24` or `skx_24` all name the same one."""
    wanted = name.lower().removesuffix("-slice")
    for candidate in builtin_names():
        if candidate.lower().removesuffix("-slice") == wanted:
            d = builtin_dir()
            model = load_model(
                d / f"{BASE_PREFIX}{candidate}{SUFFIX}", d / f"{MASKS_PREFIX}{candidate}{SUFFIX}"
            )
            return SliceHashModel(
                name=candidate,
                base=model.base,
                masks=model.masks,
                low_bit=model.low_bit,
                high_bit=model.high_bit,
                source=f"built-in {candidate} (McCalpin, Intel_Address_Hash 88912ea)",
            )
    raise AddrInputError(f"no built-in slice-hash model {name!r}; built-in: {', '.join(builtin_names())}")


def builtin_for(processor: str, n_slices: int) -> SliceHashModel | None:
    name = f"{processor}_{n_slices}-slice"
    return builtin_model(name) if name in builtin_names() else None


__all__ = [
    "LINE_BITS",
    "builtin_dir",
    "builtin_for",
    "builtin_model",
    "builtin_names",
    "load_model",
    "read_base_sequence",
    "read_masks",
    "table_stem",
    "write_tables",
]
