"""Reading physical addresses: address lists (text), (address, slice) sample CSVs, a campaign's pages.

Address text: one address per line, hex `0x...` or decimal (parsed by the native kernel's parser).
Sample CSV: a header naming at least `address` and `slice` (other columns are ignored), one sample per line;
this is what `tailscope addr measure` writes and `tailscope addr infer` reads.
Every problem is an AddrInputError naming FILE:LINE.
"""

from __future__ import annotations

import csv
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tailscope.addr.errors import AddressRangeError, AddrInputError
from tailscope.addr.kernel import AddressHash, parse_addresses

if TYPE_CHECKING:
    import pandas as pd  # imported where used: `tailscope --help` must not load pandas

STDIN = "-"


def _read_bytes(path: Path | str) -> bytes:
    if str(path) == STDIN:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise AddrInputError(f"{path}: no such file") from None
    except OSError as exc:
        raise AddrInputError(f"{path}: cannot read ({exc.strerror})") from None


def _line_text(text: bytes, number: int) -> str:
    lines = text.split(b"\n")
    raw = lines[number - 1] if number - 1 < len(lines) else b""
    return raw.decode(errors="replace").strip()[:60]


def parse_address_text(text: bytes, where: str) -> np.ndarray:
    """uint64 addresses of `text`; `where` names the source in errors (`FILE` or `argument`)."""
    values, bad = parse_addresses(text)
    if bad is not None:
        got = _line_text(text, bad)
        what = f"got {got!r}" if got else "the line is empty"
        raise AddrInputError(
            f"{where}:{bad}: expected a physical address (hex 0x... or decimal, below 2^64), {what}"
        )
    return values


def read_address_file(path: Path | str) -> np.ndarray:
    return parse_address_text(_read_bytes(path), "<stdin>" if str(path) == STDIN else str(path))


def parse_address_args(args: list[str]) -> np.ndarray:
    for i, arg in enumerate(args, 1):
        if "\n" in arg or not arg.strip():
            raise AddrInputError(
                f"argument {i}: expected a physical address (hex 0x... or decimal), got {arg!r}"
            )
    values, bad = parse_addresses("\n".join(args).encode())
    if bad is not None:
        raise AddrInputError(
            f"argument {bad}: expected a physical address (hex 0x... or decimal, below 2^64), "
            f"got {args[bad - 1]!r}"
        )
    return values


def map_or_refuse(
    hash_: AddressHash, addresses: np.ndarray, where: str, *, first_line: int = 1
) -> np.ndarray:
    """Map addresses; an address beyond the range becomes `where:LINE: ...` (LINE counted from first_line)."""
    try:
        return hash_.map(addresses)
    except AddressRangeError as exc:
        raise AddressRangeError(
            f"{where}:{exc.position + first_line}: {exc}", exc.position, exc.address
        ) from None


# --- (address, slice) samples --------------------------------------------------------------------------
@dataclass(frozen=True)
class Samples:
    """Measured (physical address, slice) pairs in file order; `lines[i]` is sample i's line in the file."""

    addresses: np.ndarray  # uint64
    slices: np.ndarray  # int64
    lines: np.ndarray  # int64, 1-based
    source: str


def read_samples(path: Path | str) -> Samples:
    """Read a sample CSV (`address,slice[,...]` header). Empty slice fields are refused, not skipped."""
    import pandas as pd

    where = "<stdin>" if str(path) == STDIN else str(path)
    raw = _read_bytes(path)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise AddrInputError(f"{where}: not a text file") from None
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise AddrInputError(f"{where}:1: empty; expected a header line with columns address,slice") from None
    names = [h.strip().lower() for h in header]
    if "address" not in names or "slice" not in names:
        raise AddrInputError(f"{where}:1: expected a header naming columns address and slice, got {header!r}")
    ia, islice = names.index("address"), names.index("slice")
    need = max(ia, islice) + 1
    addr_text: list[str] = []
    slice_text: list[str] = []
    lines: list[int] = []
    for row in reader:
        number = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) < need:
            raise AddrInputError(
                f"{where}:{number}: expected {len(names)} fields ({','.join(names)}), got {row!r}"
            )
        addr_text.append(row[ia].strip())
        slice_text.append(row[islice].strip())
        lines.append(number)
    line_numbers = np.array(lines, dtype=np.int64)
    values, bad = (
        parse_addresses("\n".join(addr_text).encode()) if addr_text else (np.zeros(0, np.uint64), None)
    )
    if bad is not None:
        raise AddrInputError(
            f"{where}:{lines[bad - 1]}: expected a physical address (hex 0x... or decimal) "
            "in column address, "
            f"got {addr_text[bad - 1]!r}"
        )
    ids = pd.Series(slice_text, dtype=object)
    ok = ids.str.fullmatch(r"\d{1,5}").to_numpy(dtype=bool, na_value=False) if len(ids) else np.zeros(0, bool)
    numeric = (
        pd.to_numeric(ids.where(ok, "0")).to_numpy(dtype=np.int64) if len(ids) else np.zeros(0, np.int64)
    )
    ok = ok & (numeric <= 0xFFFF)
    if not ok.all():
        i = int(np.argmin(ok))
        raise AddrInputError(
            f"{where}:{lines[i]}: expected a slice id (decimal 0..65535) in column slice, "
            f"got {slice_text[i]!r}"
        )
    return Samples(values, numeric, line_numbers, where)


# --- a campaign's recorded pages ----------------------------------------------------------------------
PAGE_COLUMNS = ("run_id", "array", "thread", "virtual_address", "physical_address", "page_size")


def campaign_pages(campaign_dir: Path) -> pd.DataFrame:
    """Every recorded page with a physical address, with its run's node, variant, trial (store views)."""
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    con = connect(Campaign.open(Path(campaign_dir)))
    try:
        pages = con.pages(with_trials=True)
    finally:
        con.close()
    return pages


def campaign_virtual_nodes(campaign_dir: Path) -> dict[str, str]:
    """node -> hypervisor for the campaign's nodes whose recorded facts say they are virtual machines."""
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    con = connect(Campaign.open(Path(campaign_dir)))
    try:
        return con.virtual_nodes()
    finally:
        con.close()


def campaign_nodes(campaign_dir: Path) -> list[str]:
    """The nodes a campaign's trials ran on."""
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    con = connect(Campaign.open(Path(campaign_dir)))
    try:
        return con.node_names()
    finally:
        con.close()
