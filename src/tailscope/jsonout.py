"""The one way a `--json` verb writes its JSON: encoded at once (orjson, in C) and written in one call.

`json.dump(..., indent=1)` uses the pure-Python encoder and writes token by token: `analyze --json` of a
1,000-node campaign made 4 million write() calls for 27.6 MB when stdout was unbuffered
(PYTHONUNBUFFERED=1, as in many job environments), and the encoding alone took seconds. Here dataclasses
(the analysis result), numpy scalars and arrays are encoded natively; anything else goes through
`default` (str unless the verb says otherwise). Output is indented by two spaces and ends with a newline.
Not-a-number and infinite floats are written as null (JSON has no NaN).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO


def encode(data: Any, *, sort_keys: bool = False, default: Callable[[Any], Any] = str) -> bytes:
    """`data` as indented UTF-8 JSON with a final newline."""
    import orjson

    option = (
        orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    )
    if sort_keys:
        option |= orjson.OPT_SORT_KEYS
    return orjson.dumps(data, default=default, option=option)


def write_json(
    data: Any,
    out: TextIO | None = None,
    *,
    sort_keys: bool = False,
    default: Callable[[Any], Any] = str,
) -> None:
    """Write `data` as JSON to `out` (default stdout) in one call, through its binary buffer if any."""
    stream = sys.stdout if out is None else out
    payload = encode(data, sort_keys=sort_keys, default=default)
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (io.StringIO in tests)
        stream.write(payload.decode())
        return
    stream.flush()  # keep the order of anything written before
    buffer.write(payload)
    buffer.flush()
