"""CLI glue for the counter importers and the exporter: `import perfcounts|perf-csv|likwid-csv FILE
--campaign DIR`
and `export perfcounts DIR -o FILE`. Errors are ImportInputError (exit 2 through cli._ERRORS)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tailscope.importers import ImportInputError

COUNTER_FORMATS = ("perfcounts", "perf-csv", "likwid-csv")


def run_counter_import(args: argparse.Namespace) -> int:
    """The `import` verb for the counter formats (called from cli.cmd_import)."""
    from tailscope.store.load import load_into

    path: Path = args.file
    if not path.is_file():
        raise ImportInputError(f"{path}: no such file")
    node = getattr(args, "node", None)
    with load_into(args.campaign, f"import {args.format} {path.name}", create=True) as load:
        _import_counters(args, path, load, node)
    return 0


def _import_counters(args: argparse.Namespace, path: Path, load: Any, node: str | None) -> dict[str, Any]:
    from tailscope.store.campaign import new_task_id

    campaign = load
    counts: dict[str, Any]
    if args.format == "perfcounts":
        from tailscope.importers.perfcounts import import_perfcounts

        counts = import_perfcounts(path, campaign, node=node, task=new_task_id())
        print(
            f"imported {counts['samples']} samples ({counts['rows']} values, {counts['series']} "
            "series) of node "
            f"{counts['node']} into {campaign.root}"
        )
    elif args.format == "perf-csv":
        from tailscope.importers.perf_csv import import_perf_csv

        counts = import_perf_csv(path, campaign, node=node, task=new_task_id())
        print(
            f"imported {counts['samples']} intervals ({counts['rows']} values) of node "
            f"{counts['node']} into {campaign.root}"
        )
    else:
        from tailscope.importers.likwid_csv import import_likwid_csv

        counts = import_likwid_csv(path, campaign, node=node, name=args.name, task=new_task_id())
        print(
            f"imported {counts['rows']} counter values ({counts['runs']} runs) of node "
            f"{counts['node']} into {campaign.root}"
        )
    return counts


def cmd_export(args: argparse.Namespace) -> int:
    from tailscope.importers.perfcounts_export import export_perfcounts

    counts = export_perfcounts(args.campaign, args.output, node=args.node, source=args.source)
    print(
        f"exported {counts['samples']} samples ({counts['rows']} values) of node {counts['node']} "
        f"to {args.output}"
    )
    return 0


def add_export_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="export a campaign's samples to a foreign format")
    p.add_argument("format", choices=["perfcounts"], help="perfcounts: the seed sampler's text format")
    p.add_argument("campaign", type=Path, metavar="DIR")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE")
    p.add_argument("--node", help="the node whose samples to write (needed when there are several)")
    p.add_argument("--source", help="the samples' source (needed when there are several)")
    p.set_defaults(func=cmd_export)
