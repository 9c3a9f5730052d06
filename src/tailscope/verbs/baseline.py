"""A probe's baseline for `check`'s stopping: the node's own history, else the fleet's (issue 33).

Read from the history's entries (history/data.py HistoryData: one row per campaign, node and probe variant,
with its median) of the same variant judged healthy, leaving out excluded entries (`history exclude`):
- the node's own: the median of its latest MAX_ENTRIES healthy entries' medians, however many inconclusive
  or degraded ones came after them (a node busy at its last checks keeps the level it had when quiet);
- else the fleet's: the median, over the other nodes with a healthy entry (at least MIN_FLEET_NODES, as the
  fleet screen asks of a variant, analysis/cluster.py), of each node's latest healthy median.
Never an inconclusive or degraded entry: a degraded campaign's level is a bad spell, not the level to return
to, and an inconclusive one's may have been measured under others' load (`check --between-jobs` appends
its busy checks too). Taken as a baseline, a level measured slow would let a later slowdown of the same
size pass as "within" and, once that check is appended as healthy, become the node's level for good.
Else none: the probe is judged by the campaign's own rules at its trial cap. The baseline is taken as a known
value: its entries' medians come from tens to hundreds of trials each, so its own error is small beside the
confidence sequence of a few trials it is compared with (a baseline of one short entry is said so: entries
and trials are printed with every level claim).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tailscope.analysis.sequential import Baseline

MAX_ENTRIES = 10  # the node's latest entries its level is the median of
MIN_FLEET_NODES = 3
COLUMNS = ("campaign", "node", "variant", "median", "n", "verdict", "ended_at")  # what the rule reads


def history_location(args: Any) -> str | None:
    """--history, else $TAILSCOPE_HISTORY, else None."""
    from tailscope.history.store import ENV

    return getattr(args, "history", None) or os.environ.get(ENV) or None


def baselines_from_history(
    location: str, node: str, variants: Iterable[str], *, exclude_campaign: str | None = None
) -> tuple[dict[str, Baseline | None], list[str]]:
    """variant id -> its baseline (or None), and warning lines (a history that cannot be read gives no
    baselines and one line: the check then judges by the campaign's own rules).

    Only what the rule reads is read (HistoryStore.read_entries): this node's entries of the variants, then,
    for the variants it has no healthy entry of, every node's: a check between jobs on one node of a fleet's
    year of history (1,000 nodes x 365 days x 4 probes) read the whole history into pandas for its four
    numbers, 11 s and 900 MiB here."""
    wanted = list(dict.fromkeys(variants))
    damaged: list[str] = []
    try:
        from tailscope.history.store import open_history

        store = open_history(location)
        own, damaged = store.read_entries(wanted, nodes=[node], columns=COLUMNS)
        found = baselines_from_entries(own, node, wanted, exclude_campaign=exclude_campaign)
        missing = [vid for vid in wanted if found[vid] is None]
        if missing:  # a node without healthy entries of its own: the fleet's, from every node's entries
            fleet, damaged = store.read_entries(missing, columns=COLUMNS)
            found.update(baselines_from_entries(fleet, node, missing, exclude_campaign=exclude_campaign))
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a missing or damaged history: the check still runs, without a baseline
        from tailscope.history.store import redact
        from tailscope.printable import printable

        text = printable(redact(" ".join(str(exc).split()) or type(exc).__name__))
        return dict.fromkeys(wanted), [f"history {printable(redact(location))}: no baseline: {text}"]
    return found, [f"history: {line}" for line in damaged]


def baselines_from_entries(
    entries: Any, node: str, variants: Iterable[str], *, exclude_campaign: str | None = None
) -> dict[str, Baseline | None]:
    """The rule of the module text on a HistoryData.entries frame."""
    out: dict[str, Baseline | None] = {}
    if entries is None or len(entries) == 0:
        return dict.fromkeys(variants)
    frame = entries
    usable = ~frame["excluded"].astype(bool) if "excluded" in frame.columns else True
    usable = usable & (frame["verdict"].astype(str) == "healthy") & (frame["median"] > 0)
    if exclude_campaign is not None:
        usable = usable & (frame["campaign"].astype(str) != exclude_campaign)
    frame = frame.loc[usable]
    nodes = frame["node"].astype(str)
    by_variant = frame["variant"].astype(str)
    for vid in variants:
        mine = frame.loc[(by_variant == vid) & (nodes == node)].sort_values("ended_at")
        if len(mine):
            latest = mine.tail(MAX_ENTRIES)
            out[vid] = Baseline(
                float(latest["median"].median()), "history", len(latest), int(latest["n"].sum())
            )
            continue
        others = frame.loc[(by_variant == vid) & (nodes != node)].sort_values("ended_at")
        latest_per_node = others.groupby(others["node"].astype(str), sort=False).tail(1)
        if len(latest_per_node) >= MIN_FLEET_NODES:
            out[vid] = Baseline(
                float(latest_per_node["median"].median()),
                "fleet",
                len(latest_per_node),
                int(latest_per_node["n"].sum()),
            )
        else:
            out[vid] = None
    return out


def warn(lines: Iterable[str]) -> None:
    for line in lines:
        print(f"tailscope: warning: {line}", file=sys.stderr)
