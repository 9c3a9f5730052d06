"""The HTML pieces every report section builds with: tables, cells, explanations (text always escaped)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from tailscope.printable import printable


def esc(text: object) -> str:
    """Text for an HTML text node or attribute value (escapes & < > " ')."""
    return html.escape(str(text), quote=True)


def plotly_text(text: object) -> str:
    """Text for a Plotly string (a title, annotation, axis tick, hover or legend label): control characters
    as visible escapes, and `&`, `<`, `>` as entities, so the pseudo-HTML Plotly applies to its strings
    (`<a href>` a link, `<span style>`, `<br>`, `<b>`) is shown as it was typed, never applied."""
    return printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def table(headers: Sequence[str] | None, rows: Iterable[Sequence[str]], *, css: str = "") -> str:
    """A scrollable table; `rows` are sequences of ready `td(...)` cells."""
    cls = f' class="{css}"' if css else ""
    head = "<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr></thead>" if headers else ""
    body = "\n".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f'<div class="scroll"><table{cls}>{head}<tbody>\n{body}\n</tbody></table></div>'


def td(text: object, *, num: bool = False, css: str = "", title: str = "") -> str:
    """One cell (a long table has thousands: the node verdicts and checks of 1,000 nodes)."""
    classes = ("num " + css if css else "num") if num else css
    attrs = (f' class="{classes}"' if classes else "") + (f' title="{esc(title)}"' if title else "")
    return f"<td{attrs}>{html.escape(str(text), quote=True)}</td>"


def explain(text: str) -> str:
    return f'<p class="explain">{esc(text)}</p>'
