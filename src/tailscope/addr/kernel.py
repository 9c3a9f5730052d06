"""The native address-hash kernel (native/addr/slicehash.c, libtailscope_addr.so), loaded with ctypes.

One implementation of the map: every caller (map, properties, infer's checks, measure's simulation, the
snoop-filter model) goes through `AddressHash.map`. The library is found by
`tailscope.native.native_library` (`$TAILSCOPE_NATIVE_LIB_DIR` for a development build, else the installed
package's `_native/lib` next to `_native/bin`).
"""

from __future__ import annotations

import ctypes
import errno
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np

from tailscope.addr.errors import AddressRangeError
from tailscope.native import NativeMissingError, native_library

LIB_NAME = "tailscope_addr"  # libtailscope_addr.so, found by tailscope.native.native_library
ABI = 1  # TS_ADDRHASH_ABI in slicehash.h
MAX_ROWS = 16  # TS_ADDRHASH_MAX_ROWS

_u64p = ctypes.POINTER(ctypes.c_uint64)
_u16p = ctypes.POINTER(ctypes.c_uint16)


def library_path() -> Path:
    """Where the kernel library is (raises NativeMissingError, saying how to build it, when absent)."""
    return native_library(LIB_NAME)


@cache
def _library() -> ctypes.CDLL:
    path = library_path()
    lib = ctypes.CDLL(str(path))
    lib.ts_addrhash_abi.restype = ctypes.c_int
    lib.ts_addrhash_abi.argtypes = []
    if lib.ts_addrhash_abi() != ABI:
        raise NativeMissingError(f"{path}: ABI {lib.ts_addrhash_abi()}, expected {ABI}; rebuild native/addr")
    lib.ts_addrhash_new.restype = ctypes.c_int
    lib.ts_addrhash_new.argtypes = [
        ctypes.POINTER(ctypes.c_void_p),
        _u64p,
        ctypes.c_uint,
        _u16p,
        ctypes.c_size_t,
        ctypes.c_uint,
    ]
    lib.ts_addrhash_free.restype = None
    lib.ts_addrhash_free.argtypes = [ctypes.c_void_p]
    lib.ts_addrhash_map.restype = ctypes.c_int64
    lib.ts_addrhash_map.argtypes = [ctypes.c_void_p, _u64p, ctypes.c_size_t, _u16p]
    lib.ts_addr_parse.restype = ctypes.c_int64
    lib.ts_addr_parse.argtypes = [
        ctypes.c_char_p,
        ctypes.c_size_t,
        _u64p,
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.ts_format_lines.restype = ctypes.c_size_t
    lib.ts_format_lines.argtypes = [_u16p, ctypes.c_size_t, ctypes.c_char_p]
    return lib


class AddressHash:
    """A GF(2)-linear address hash: index bit k = parity(PA & rows[k]); value = table[index]."""

    def __init__(
        self, rows: Sequence[int], table: np.ndarray | None, high_bit: int, *, name: str = "hash"
    ) -> None:
        if not 1 <= len(rows) <= MAX_ROWS:
            raise ValueError(f"{name}: {len(rows)} index bits; the kernel takes 1..{MAX_ROWS}")
        self.name = name
        self.high_bit = high_bit
        self._rows = np.array([int(r) for r in rows], dtype=np.uint64)
        self._table = None if table is None else np.ascontiguousarray(table, dtype=np.uint16)
        lib = _library()
        handle = ctypes.c_void_p()
        table_ptr = None if self._table is None else self._table.ctypes.data_as(_u16p)
        table_len = 0 if self._table is None else self._table.size
        rc = lib.ts_addrhash_new(
            ctypes.byref(handle),
            self._rows.ctypes.data_as(_u64p),
            len(rows),
            table_ptr,
            table_len,
            high_bit,
        )
        if rc != 0:
            raise ValueError(f"{name}: the kernel refused the hash ({errno.errorcode.get(rc, rc)})")
        self._handle = handle
        self._lib = lib

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            self._lib.ts_addrhash_free(handle)
            self._handle = None

    @property
    def valid_limit(self) -> int:
        return 1 << (self.high_bit + 1)

    def map(self, addresses: np.ndarray) -> np.ndarray:
        """Hash every address (any integer array, converted to uint64); same shape, uint16.

        Raises AddressRangeError (with the position in the flattened array) for the first address at or
        above 2^(high_bit + 1), and for negative values.
        """
        a = np.asarray(addresses)
        if a.dtype != np.uint64:
            if a.size and a.dtype.kind == "i" and int(a.min()) < 0:
                pos = int(np.argmax(a.reshape(-1) < 0))
                value = int(a.reshape(-1)[pos])
                raise AddressRangeError(f"{value} is not a physical address (negative)", pos, value)
            a = a.astype(np.uint64)
        flat = np.ascontiguousarray(a.reshape(-1))
        out = np.empty(flat.size, dtype=np.uint16)
        if flat.size:
            bad = self._lib.ts_addrhash_map(
                self._handle, flat.ctypes.data_as(_u64p), flat.size, out.ctypes.data_as(_u16p)
            )
            if bad >= 0:
                value = int(flat[bad])
                raise AddressRangeError(
                    f"physical address 0x{value:x} is beyond the valid range of {self.name} (addresses "
                    f"below 2^{self.high_bit + 1} = 0x{self.valid_limit:x}); refusing to map it",
                    int(bad),
                    value,
                )
        return out.reshape(a.shape)


def parse_addresses(text: bytes) -> tuple[np.ndarray, int | None]:
    """Addresses of `text` (one per line, hex `0x...` or decimal) and None, or (partial, bad 1-based line)."""
    lib = _library()
    cap = text.count(b"\n") + 1
    out = np.empty(cap, dtype=np.uint64)
    bad = ctypes.c_size_t(0)
    n = lib.ts_addr_parse(text, len(text), out.ctypes.data_as(_u64p), cap, ctypes.byref(bad))
    if n < 0:
        return out[: bad.value - 1], int(bad.value)
    return out[:n], None


def format_lines(values: np.ndarray) -> str:
    """Values (0..65535) as decimal numbers, one per line (the output of `addr map`)."""
    v = np.ascontiguousarray(values, dtype=np.uint16).reshape(-1)
    if v.size == 0:
        return ""
    buffer = ctypes.create_string_buffer(6 * v.size)
    size = _library().ts_format_lines(v.ctypes.data_as(_u16p), v.size, buffer)
    return buffer.raw[:size].decode("ascii")
