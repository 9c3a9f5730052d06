"""Names of slice-hash table files and of the built-in models, without numpy.

Kept apart from tables.py (which reads the tables into numpy arrays) so that `tailscope --help` can list
the built-in models without loading numpy. tables.py re-exports everything here.
"""

from __future__ import annotations

import re
from pathlib import Path

BASE_PREFIX = "BaseSequence_"
MASKS_PREFIX = "PermSelectMasks_"
SUFFIX = ".tbl"


def table_stem(path: Path) -> str | None:
    """`SKX_24-slice` for `BaseSequence_SKX_24-slice.tbl` or `PermSelectMasks_SKX_24-slice.tbl`."""
    name = Path(path).name
    for prefix in (BASE_PREFIX, MASKS_PREFIX):
        if name.startswith(prefix) and name.endswith(SUFFIX):
            return name[len(prefix) : -len(SUFFIX)]
    return None


def builtin_dir() -> Path:
    """The package's `tables` directory (installed as plain files next to this module)."""
    return Path(__file__).resolve().parent / "tables"


def builtin_names() -> list[str]:
    """Names of the built-in models (`SKX_24-slice`, ...), sorted by processor then slice count."""
    names = [stem for p in builtin_dir().glob(f"{BASE_PREFIX}*{SUFFIX}") if (stem := table_stem(p))]
    names = [n for n in names if (builtin_dir() / f"{MASKS_PREFIX}{n}{SUFFIX}").is_file()]
    return sorted(names, key=_name_key)


def _name_key(name: str) -> tuple[str, int, str]:
    match = re.fullmatch(r"(.+)_(\d+)-slice", name)
    return (match.group(1), int(match.group(2)), name) if match else (name, 0, name)
