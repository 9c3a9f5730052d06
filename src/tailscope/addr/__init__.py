"""Physical addresses and the L3/CHA slice hash: the seed's deepest finding as tools.

- `model`: a slice-hash model (base sequence + permutation-select masks, McCalpin's format) and its
  valid address range; `tables`: reading and writing the `.tbl` files and the built-in models;
  `kernel`: the native map (C, `native/addr/slicehash.c`); `detect`: which model fits this node.
- `properties`: uniform block, lines per slice, capacity fraction lost, slice loads of pages and runs.
- `infer`: a model from measured (address, slice) pairs by GF(2) linear algebra (`gf2`).
- `measure`: the measurement procedure through uncore CHA counters, against a counter source.
- `snoop`, `explain`: a snoop-filter conflict model and the search for address features of slow runs.
- `cli`: the `tailscope addr` verbs.
"""

from __future__ import annotations

from tailscope.addr.errors import AddressRangeError, AddrInputError

__all__ = ["AddrInputError", "AddressRangeError"]
