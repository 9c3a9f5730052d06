"""Campaigns in tests: an iterations CSV to import, and the rows of a query read back through the store's
one read path."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from pathlib import Path

from tailscope.store.campaign import Campaign
from tailscope.store.read import connect


def write_iterations_csv(
    path: Path,
    nodes: Iterable[str],
    runs: int,
    iterations: int,
    value: Callable[[str, int, int], object],
    unit: str,
) -> Path:
    """`import iterations`' CSV (node,run,iteration,value,unit): per node, `runs` runs of `iterations`
    iterations, each iteration's value `value(node, run, iteration)` (called in file order)."""
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["node", "run", "iteration", "value", "unit"])
        for node in nodes:
            for run in range(runs):
                for it in range(iterations):
                    out.writerow([node, run, it, value(node, run, it), unit])
    return path


def stored(campaign: Path, sql: str) -> list[tuple]:
    """The rows `sql` gives over the campaign's views (runs, iterations, counters, ...)."""
    con = connect(Campaign.open(campaign))
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def add_as_healthy(history: Path, campaign: Path) -> None:
    """`history add HISTORY CAMPAIGN` through the history's own path, with the campaign's entries judged
    healthy whatever this machine's load made of them: only healthy entries are a baseline
    (verbs/baseline.py), and the tests of the stopping need one on a shared machine that is rarely quiet.
    The level is the campaign's own (its trials' medians); the rule itself is tested in
    tests/history/test_baseline.py."""
    import dataclasses

    from tailscope.analysis.model import Settings
    from tailscope.history.store import open_history
    from tailscope.verbs.history import summarize_campaign

    summary = summarize_campaign(campaign, Settings())
    entries = tuple(dataclasses.replace(e, verdict="healthy") for e in summary.entries)
    open_history(history).add(dataclasses.replace(summary, entries=entries))
