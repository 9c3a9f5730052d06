"""Slurm's hostlist syntax, expanded by tailscope's own parser (never a shell, never `scontrol`).

    c[001-004,007]   -> c001 c002 c003 c004 c007   (zero padding: the width of the range's first bound)
    r[1-2]n[01-03]   -> r1n01 r1n02 r1n03 r2n01 ... (several bracket groups: every combination, in order)
    a1,b[2-3]        -> a1 b2 b3                   (commas between hosts; inside brackets: between ranges)
    n[9-10]-ib       -> n9-ib n10-ib               (text after a group)

What a sacct NodeList, a Slurm environment variable ($SLURM_NODELIST) or a campaign spec holds. A list that
would expand to more than MAX_HOSTS names (`n[0-999999999]`) is refused before anything is expanded, as is
anything malformed (an unclosed or nested bracket, a bound that is not a number, a range running backwards,
an empty name): one `HostlistError` naming the expression and what was expected.
"""

from __future__ import annotations

from tailscope.errors import InputError

MAX_HOSTS = 100_000  # more nodes than any one job or cluster has: what a hostlist may expand to
MAX_DIGITS = 12  # a range bound's digits (a node number, not a date)
_CONTROL = frozenset(chr(c) for c in (*range(0x20), 0x7F))


class HostlistError(InputError):
    """A hostlist expression that cannot be expanded (malformed, or too many names)."""


def _show(expression: str) -> str:
    return repr(expression if len(expression) <= 80 else expression[:77] + "...")


def _split_top(expression: str) -> list[str]:
    """The comma-separated host expressions (commas inside brackets stay), brackets checked."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expression):
        if ch == "[":
            if depth:
                raise HostlistError(f"hostlist {_show(expression)}: a bracket inside a bracket at {i + 1}")
            depth = 1
        elif ch == "]":
            if not depth:
                raise HostlistError(f"hostlist {_show(expression)}: ']' without '[' at {i + 1}")
            depth = 0
        elif ch == "," and not depth:
            parts.append(expression[start:i])
            start = i + 1
        elif ch.isspace() or ch in _CONTROL:
            raise HostlistError(f"hostlist {_show(expression)}: a space or control character at {i + 1}")
    if depth:
        raise HostlistError(f"hostlist {_show(expression)}: '[' not closed")
    parts.append(expression[start:])
    return parts


def _ranges(expression: str, body: str) -> list[tuple[int, int, int]]:
    """`001-004,007` -> [(1, 4, 3), (7, 7, 3)]: (first, last, width)."""
    out = []
    for item in body.split(","):
        lo, dash, hi = item.partition("-")
        if not (lo.isdigit() and lo.isascii()) or (dash and not (hi.isdigit() and hi.isascii())):
            raise HostlistError(
                f"hostlist {_show(expression)}: {item!r} in brackets: expected a number or a range like 01-16"
            )
        if len(lo) > MAX_DIGITS or len(hi) > MAX_DIGITS:
            raise HostlistError(f"hostlist {_show(expression)}: {item!r}: more than {MAX_DIGITS} digits")
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first:
            raise HostlistError(f"hostlist {_show(expression)}: range {item!r} runs backwards")
        out.append((first, last, len(lo)))
    return out


def _pieces(expression: str, host: str) -> list[str | list[tuple[int, int, int]]]:
    """`r[1-2]n[01-03]` -> ['r', [(1, 2, 1)], 'n', [(1, 3, 2)]]."""
    pieces: list[str | list[tuple[int, int, int]]] = []
    rest = host
    while "[" in rest:
        text, _, tail = rest.partition("[")
        body, _, rest = tail.partition("]")
        if text:
            pieces.append(text)
        pieces.append(_ranges(expression, body))
    if rest:
        pieces.append(rest)
    return pieces


def count(expression: str) -> int:
    """How many names `expression` expands to (checked, nothing expanded)."""
    total = 0
    for host in _split_top(expression):
        if not host:
            raise HostlistError(f"hostlist {_show(expression)}: an empty name (two commas, or one at an end)")
        n = 1
        for piece in _pieces(expression, host):
            if isinstance(piece, list):
                n *= sum(last - first + 1 for first, last, _ in piece)
                if n > MAX_HOSTS:
                    break
        total += n
        if total > MAX_HOSTS:
            raise HostlistError(
                f"hostlist {_show(expression)}: more than {MAX_HOSTS:,} names; refused (not expanded)"
            )
    return total


def expand(expression: str) -> list[str]:
    """Every name of `expression`, in its order (duplicates kept as written)."""
    count(expression)  # the bound first: nothing large is ever built
    out: list[str] = []
    for host in _split_top(expression):
        names = [""]
        for piece in _pieces(expression, host):
            if isinstance(piece, str):
                names = [n + piece for n in names]
            else:
                numbers = [f"{i:0{w}d}" for first, last, w in piece for i in range(first, last + 1)]
                names = [n + x for n in names for x in numbers]
        out.extend(names)
    return out


def first(expression: str) -> str:
    """The first name of `expression` (a job's batch host: the first node of its allocation), checked as
    `expand` checks it, nothing else built."""
    count(expression)
    host = _split_top(expression)[0]
    return "".join(p if isinstance(p, str) else f"{p[0][0]:0{p[0][2]}d}" for p in _pieces(expression, host))
