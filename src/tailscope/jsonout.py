"""The one way a `--json` verb writes its JSON: encoded at once (orjson, in C) and written in one call.

`json.dump(..., indent=1)` uses the pure-Python encoder and writes token by token: `analyze --json` of a
1,000-node campaign made 4 million write() calls for 27.6 MB when stdout was unbuffered
(PYTHONUNBUFFERED=1, as in many job environments), and the encoding alone took seconds. Here dataclasses
(the analysis result), numpy scalars and arrays are encoded natively; anything else goes through
`default` (str unless the verb says otherwise). Output is indented by two spaces and ends with a newline.
Not-a-number and infinite floats are written as null (JSON has no NaN).

A dataclass (the `analyze --json` object) is written field by field, and a long list field (its runs) in
chunks of `CHUNK_ITEMS` items: the same bytes as one `encode`, without 35 MB of JSON held at once beside the
analysis of 1,000 nodes (its peak memory, issue 11), and still in few large write() calls.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

CHUNK_ITEMS = 2000  # items of a long list field encoded at once (a few MB of JSON)


def encode(data: Any, *, sort_keys: bool = False, default: Callable[[Any], Any] = str) -> bytes:
    """`data` as indented UTF-8 JSON with a final newline."""
    import orjson

    option = _options() | orjson.OPT_APPEND_NEWLINE
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    return orjson.dumps(data, default=_items_first(default), option=option)


def _items_first(default: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`default`, after a sequence that writes its own JSON items (`json_items`: the analysed runs held by
    column, analysis/run_columns.py) is given to orjson as the list of its items."""

    def fallback(value: Any) -> Any:
        if hasattr(value, "json_items"):
            return list(value)
        return default(value)

    return fallback


def _options() -> int:
    """orjson's options for every piece: two-space indents, numpy values, non-string keys."""
    import orjson

    return orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def encode_chunks(
    data: Any, *, default: Callable[[Any], Any] = str, chunk_items: int = CHUNK_ITEMS
) -> Iterator[bytes]:
    """`encode(data)` in pieces whose concatenation is exactly its bytes: a dataclass field by field (as
    orjson writes one: in field order, no field whose name starts with `_`), a list or tuple field longer
    than `chunk_items` in chunks of that many items; anything else in one piece."""
    if not dataclasses.is_dataclass(data) or isinstance(data, type):
        yield encode(data, default=default)
        return
    import orjson

    option = _options()
    items_first = _items_first(default)

    def nested(value: Any) -> bytes:  # a value one level down: each of its lines indented 2 more
        return orjson.dumps(value, default=items_first, option=option).replace(b"\n", b"\n  ")

    names = [f.name for f in dataclasses.fields(data) if not f.name.startswith("_")]
    if not names:
        yield b"{}\n"
        return
    for position, name in enumerate(names):
        value = getattr(data, name)
        head = (b"{\n  " if position == 0 else b",\n  ") + orjson.dumps(name) + b": "
        own = hasattr(value, "json_items")  # writes its items itself (the analysed runs, by column)
        if not (own or isinstance(value, list | tuple)) or len(value) <= (0 if own else chunk_items):
            yield head + nested(value)
            continue
        yield head + b"["
        for start in range(0, len(value), chunk_items):
            if own:
                items = value.json_items(start, min(start + chunk_items, len(value)), default)
            else:
                chunk = orjson.dumps(list(value[start : start + chunk_items]), default=default, option=option)
                # "[\n  item,\n  item\n]" -> its items, two levels down
                items = chunk[2:-2].replace(b"\n", b"\n  ").lstrip()
            yield (b"\n    " if start == 0 else b",\n    ") + items
        yield b"\n  ]"
    yield b"\n}\n"


# What JSON allows raw but a terminal interprets: DEL, the C1 controls, the line and paragraph separators and
# the bidirectional overrides and isolates (as printable.py; orjson escapes the C0 controls itself).
_INVISIBLE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def inert(data: bytes) -> bytes:
    """JSON bytes with those characters as `\\uXXXX` escapes: the same values when parsed, and text from
    campaigns (a node name, a note) shown on a terminal cannot reorder or recolour it."""
    return _INVISIBLE.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


def write_json(
    data: Any,
    out: TextIO | None = None,
    *,
    sort_keys: bool = False,
    default: Callable[[Any], Any] = str,
    escape_invisible: bool = False,
) -> None:
    """Write `data` as JSON to `out` (default stdout), through its binary buffer if any, ~1 MB a write
    (`escape_invisible`: through `inert`)."""
    stream = sys.stdout if out is None else out
    pieces: Iterable[bytes] = (
        [encode(data, sort_keys=sort_keys, default=default)]
        if sort_keys
        else encode_chunks(data, default=default)
    )
    if escape_invisible:
        pieces = map(inert, pieces)
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (io.StringIO in tests)
        stream.write(b"".join(pieces).decode())
        return
    stream.flush()  # keep the order of anything written before
    pending: list[bytes] = []
    size = 0
    for piece in pieces:  # joined up to ~1 MB per write(): few calls, unbuffered or not
        pending.append(piece)
        size += len(piece)
        if size >= 1 << 20:
            buffer.write(b"".join(pending))
            pending, size = [], 0
    if pending:
        buffer.write(b"".join(pending))
    buffer.flush()
