"""The `history` verb's command line (`add|show|report|compact|note|exclude`) and the `--history` option of
`check`, `campaign collect` and `analyze`: argparse only; the handlers are verbs/history.py's."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tailscope.history.store import ENV
from tailscope.options import date

Handler = Callable[[argparse.Namespace], int]


_date = date  # options.date: the one date type of the command line


def _threshold(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a fraction like 0.05") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text}: expected a fraction between 0 and 1 (0.05 = 5%)")
    return value


def add_history_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    handler: Callable[[str], Handler],
) -> argparse.ArgumentParser:
    """The `history` parser; `handler(name)` gives the function of each action (verbs/history.py)."""
    p = sub.add_parser("history", help=HELP)
    verbs = p.add_subparsers(dest="history_verb", metavar="ACTION", required=True)

    q = verbs.add_parser("add", help="append campaigns' per-(node, probe variant) summaries")
    q.add_argument("history", metavar="HISTORY", help=WHERE)
    q.add_argument("campaigns", type=Path, nargs="+", metavar="CAMPAIGN")
    q.add_argument("--threshold", type=_threshold, help="primary slow threshold (default: the settings')")
    q.set_defaults(func=handler("cmd_add"))

    for name, func, text in (
        ("show", "cmd_show", "series of medians, change points and what changed with them"),
        ("report", "cmd_report", "one offline HTML: timelines with change points, fleet heat map"),
    ):
        q = verbs.add_parser(name, help=text)
        q.add_argument("history", metavar="HISTORY", help=WHERE)
        q.add_argument("--node", help="only this node")
        q.add_argument("--probe", help="only this probe (or variant)")
        q.add_argument("--since", type=_date, metavar="DATE", help="only entries from DATE on")
        q.add_argument("--threshold", type=_threshold, help="primary slow threshold (default: the settings')")
        if name == "show":
            q.add_argument(
                "--json", action="store_true", help="changes, fleet_events, nodes (+ series with --node)"
            )
            q.add_argument("--series", action="store_true", help="print every entry of the series too")
            q.add_argument(
                "--prometheus", type=Path, metavar="FILE", help="write a node_exporter textfile (.prom)"
            )
        else:
            q.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.html")
        q.set_defaults(func=handler(func))

    q = verbs.add_parser("compact", help="merge the history's shards into one per table")
    q.add_argument("history", metavar="HISTORY", help=WHERE)
    q.set_defaults(func=handler("cmd_compact"))

    q = verbs.add_parser("note", help="record a maintenance event of a node")
    q.add_argument("history", metavar="HISTORY", help=WHERE)
    q.add_argument("node")
    q.add_argument("date", type=_date, metavar="DATE")
    q.add_argument("text", metavar="TEXT")
    q.set_defaults(func=handler("cmd_note"))

    q = verbs.add_parser(
        "exclude", help="take a bad entry out of the judgement (visibly; --undo takes it back)"
    )
    q.add_argument("history", metavar="HISTORY", help=WHERE)
    q.add_argument("node")
    q.add_argument("campaign", metavar="CAMPAIGN_ID", help="the campaign id (a unique prefix is enough)")
    q.add_argument("--variant", default="*", help="only this probe or variant (default: all of the node's)")
    q.add_argument("--reason", default="excluded by hand")
    q.add_argument("--undo", action="store_true")
    q.set_defaults(func=handler("cmd_exclude"))
    return p


WHERE = "a history directory, or postgresql://USER@HOST/DB"  # HISTORY's help, here and in `jobs`
HELP = "a node's results across campaigns: add, show change points, report, note, exclude, compact"


# --- `--history` of check, campaign collect and analyze ----------------------------------------------
def add_history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history",
        default=None,
        metavar="DIR|URL",
        help=f"append this campaign's summary to a history (default: ${ENV}); a failed append only warns",
    )
