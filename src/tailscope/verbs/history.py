"""`tailscope history ...` and the `--history` append of `check`, `campaign collect` and `analyze`: the
application functions (history/cli.py declares their options)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.errors import InputError
from tailscope.history.store import ENV
from tailscope.printable import printable

if TYPE_CHECKING:
    from tailscope.analysis.model import CampaignAnalysis, Settings
    from tailscope.history.directory import DirectoryHistory
    from tailscope.history.summary import CampaignSummary

EXIT_OK, EXIT_DEGRADED = 0, 1


class HistoryUsageError(InputError):
    """A history option or argument that cannot be used."""


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    threshold = getattr(args, "threshold", None)
    return {"thresholds": (threshold,)} if threshold is not None else {}


def _settings(args: argparse.Namespace, campaign_dir: Path | None = None) -> Settings:
    """The judging settings, resolved in the one place every verb resolves them (verbs/settings.py): the
    campaign spec's [thresholds], then --threshold."""
    from tailscope.verbs.settings import judging_settings

    return judging_settings(campaign_dir, _overrides(args))


def summarize_campaign(
    campaign_dir: Path, settings: Settings, analysis: CampaignAnalysis | None = None
) -> CampaignSummary:
    """The campaign's entries: its analysis (done here unless given) and its nodes' latest facts."""
    import pandas as pd

    from tailscope.history.summary import summarize_analysis
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect

    campaign = Campaign.open(campaign_dir)
    with connect(campaign) as con:
        if analysis is None:
            from tailscope.verbs.workflow import analyze_campaign

            analysis = analyze_campaign(campaign_dir, settings, con=con)
        nodes = con.nodes()
    node_facts: dict[str, tuple[dt.datetime, dict[str, Any]]] = {}
    for row in nodes.itertuples(index=False):
        try:
            facts = json.loads(str(row.facts))
        except ValueError:
            facts = {}
        collected = pd.Timestamp(row.collected_at)
        collected = collected.tz_localize("UTC") if collected.tzinfo is None else collected.tz_convert("UTC")
        node_facts[str(row.node)] = (collected.to_pydatetime(), facts if isinstance(facts, dict) else {})
    return summarize_analysis(analysis, campaign.manifest.name, node_facts)


# --- the verbs --------------------------------------------------------------------------------------
def cmd_add(args: argparse.Namespace) -> int:
    from tailscope.history.store import open_history

    store = open_history(args.history)
    # every campaign read before anything is added: one that cannot be read refuses the command whole
    summaries = [(c, summarize_campaign(c, _settings(args, c))) for c in args.campaigns]
    for campaign, summary in summaries:
        result = store.add(summary)
        print(printable(result.sentence(f"{store.location} <- {campaign}")))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from tailscope.history.show import answer, prometheus_text, render, to_json
    from tailscope.history.store import open_history

    data = open_history(args.history).read()
    result = answer(data, _settings(args), node=args.node, probe=args.probe, since=args.since)
    if args.prometheus:
        from tailscope.store.campaign import write_atomic_bytes

        args.prometheus.parent.mkdir(parents=True, exist_ok=True)
        write_atomic_bytes(args.prometheus, prometheus_text(result).encode())
    if args.json:
        from tailscope.jsonout import write_json

        write_json(to_json(result, with_series=args.node is not None or args.series), escape_invisible=True)
    else:
        for d in result.damaged:
            print(f"tailscope: warning: {printable(d)}", file=sys.stderr)
        print(
            "\n".join(
                line for line in render(result, with_series=args.series) if not line.startswith("warning:")
            )
        )
    return EXIT_DEGRADED if result.state == "degraded" else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from tailscope.history.report import write_report
    from tailscope.history.show import answer
    from tailscope.history.store import open_history

    data = open_history(args.history).read()
    result = answer(data, _settings(args), node=args.node, probe=args.probe, since=args.since)
    path = write_report(result, data, args.output)
    print(f"report: {printable(path.resolve())}")
    return EXIT_OK


def cmd_compact(args: argparse.Namespace) -> int:
    from tailscope.history.store import open_history

    store = open_history(args.history)
    before, after = store.compact(full=True)
    where = printable(store.location)
    if before == 0:
        print(f"history {where}: nothing to compact (the database keeps one row per entry)")
    else:
        print(f"history {where}: {before} commit(s) compacted into {after}")
    return EXIT_OK


def cmd_note(args: argparse.Namespace) -> int:
    from tailscope.history.store import open_history

    if not args.text.strip():
        raise HistoryUsageError('history note: TEXT is empty; say what was done ("DIMM B2 replaced")')
    store = open_history(args.history)
    store.note(args.node, args.date, args.text)
    print(
        f"history {printable(store.location)}: note for {printable(args.node)} on "
        f"{args.date.date().isoformat()} recorded"
    )
    return EXIT_OK


def cmd_exclude(args: argparse.Namespace) -> int:
    from tailscope.history.store import open_history

    store = open_history(args.history)
    count = store.exclude(args.campaign, args.node, args.variant, args.reason, excluded=not args.undo)
    what = "taken back into" if args.undo else "excluded from"
    entries = f"{count} entr{'y' if count == 1 else 'ies'}"
    print(f"history {printable(store.location)}: {entries} {what} the judgement")
    return EXIT_OK


def collect(args: argparse.Namespace) -> int:
    """`campaign collect DIR [--history H]`: the collect, then the append (a failed one only warns). DIR a
    history (the same store format): its damaged appends moved aside, and what restores their entries."""
    from tailscope.campaign.cli import cmd_collect

    history = _history_dir(args.campaign)
    if history is not None:
        return collect_history(history, quarantine_damaged=not args.no_quarantine)
    code = cmd_collect(args)
    from tailscope.campaign import slurm

    try:
        root = slurm.open_campaign(args.campaign).root  # DIR or SPEC.toml, as collect took it
    except InputError:
        return code
    append_quietly(args, root)
    return code


def _history_dir(target: Path) -> DirectoryHistory | None:
    from tailscope.history.directory import HISTORY_NAME, DirectoryHistory
    from tailscope.store.campaign import MANIFEST, Campaign

    if not (Path(target) / MANIFEST).is_file():
        return None
    try:
        name = Campaign.open(Path(target)).manifest.name
    except InputError:
        return None  # cmd_collect says what is wrong with it
    return DirectoryHistory(Path(target)) if name == HISTORY_NAME else None


def collect_history(history: DirectoryHistory, *, quarantine_damaged: bool) -> int:
    count, damaged, moved = history.collect(quarantine_damaged=quarantine_damaged)
    print(f"history: {printable(history.root)}")
    print(f"shards: {count} ({len(damaged)} damaged)")
    for bad in damaged:
        print(f"damaged shard: {printable(bad.path)}: {printable(bad.reason)}", file=sys.stderr)
    root = printable(history.root)
    if moved:
        print(
            f"moved {len(moved)} file(s) of the damaged appends to {root}/quarantine; the entries they held "
            f"are no longer in the history: `tailscope history add {root} CAMPAIGN...` adds those campaigns "
            "again (what is stored is not added twice)",
            file=sys.stderr,
        )
    elif damaged:
        print(
            "damaged shards left in place (--no-quarantine): history show leaves their rows out and history "
            f"compact refuses until `tailscope campaign collect {root}` moves them aside",
            file=sys.stderr,
        )
    return EXIT_OK if not damaged else EXIT_DEGRADED


def append_quietly(
    args: argparse.Namespace,
    campaign_dir: Path | None,
    settings: Settings | None = None,
    analysis: CampaignAnalysis | None = None,
) -> None:
    """Append `campaign_dir` (its `analysis` when the command has it) to the history named by `--history` or
    $TAILSCOPE_HISTORY. Never raises: a failure is one warning line on stderr, and the command's exit code
    stays what it was (NHC reads it)."""
    location = getattr(args, "history", None) or os.environ.get(ENV) or None
    if not location or campaign_dir is None:
        return
    try:
        from tailscope.history.store import open_history

        if settings is None:  # the campaign spec's [thresholds], else the defaults: as `verdict` judges it
            from tailscope.verbs.settings import judging_settings

            settings = judging_settings(Path(campaign_dir))
        store = open_history(location)
        result = store.add(summarize_campaign(Path(campaign_dir), settings, analysis))
        print(printable(result.sentence(str(store.location))), file=sys.stderr)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # whatever failed, the command's own result stands
        from tailscope.history.location import redact, scrub

        text = scrub(" ".join(str(exc).split()) or type(exc).__name__, location)
        print(f"tailscope: warning: history {printable(redact(location))}: not appended: {printable(text)}",
              file=sys.stderr)  # fmt: skip
