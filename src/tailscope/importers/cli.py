"""CLI glue for the importers and the exporter: `import iterations|hpl|perfcounts|perf-csv|likwid-csv FILE
--campaign DIR` and `export perfcounts DIR -o FILE`. Errors are ImportInputError (exit 2 through
cli._ERRORS)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tailscope.importers import ImportInputError

COUNTER_FORMATS = ("perfcounts", "perf-csv", "likwid-csv")


def run_import(args: argparse.Namespace) -> int:
    """The `import` verb (called from cli.cmd_import): one line saying what was stored, or exit 2."""
    paths: list[Path] = args.file  # one or more (cli.py: nargs="+")
    for path in paths:
        if path.exists() and not path.is_file():
            raise ImportInputError(f"{path}: not a regular file (expected the {args.format} file to import)")
        if not path.is_file():
            raise ImportInputError(f"{path}: no such file")
    if len(paths) > 1 and args.format != "perfcounts":
        raise ImportInputError(
            f"import {args.format}: {len(paths)} files given, expected one (only perfcounts takes several)"
        )
    path = paths[0]
    node = getattr(args, "node", None)
    if node is not None and not node.strip():
        raise ImportInputError(f"--node {node!r}: expected a node name (or leave --node out)")
    if args.format == "iterations":
        from tailscope.importers.iterations_csv import import_iterations

        counts: dict[str, Any] = import_iterations(
            path, args.campaign, name=args.name, unit=args.unit, higher_is_better=args.higher_is_better
        )
        print(
            f"imported {counts['runs']} runs ({counts['iterations']} iterations, {counts['nodes']} nodes) "
            f"into {args.campaign}"
        )
    elif args.format == "hpl":
        from tailscope.importers.hpl import import_hpl
        from tailscope.node.facts import node_name
        from tailscope.store.campaign import new_task_id
        from tailscope.store.load import load_into

        with load_into(args.campaign, f"import hpl {path.name}", create=True) as load:
            counts = import_hpl(path, load, node=node or node_name(), task=new_task_id())
        print(
            f"imported {counts['runs']} HPL runs ({counts['failed_residual']} failed the residual check, "
            f"{counts['variants']} problem sizes) into {args.campaign}"
        )
    elif args.format == "perfcounts":
        from tailscope.importers.perfcounts import import_perfcounts_files

        files = import_perfcounts_files(paths, args.campaign, node=node)
        if len(files) == 1:
            counts = files[0]
            print(
                f"imported {counts['samples']} samples ({counts['rows']} values, {counts['series']} series) "
                f"of node {counts['node']} into {args.campaign}{_notes(counts)}"
            )
        else:
            nodes = [f["node"] for f in files]
            named = ", ".join(nodes) if len(nodes) <= 4 else f"{nodes[0]}, {nodes[1]} .. {nodes[-1]}"
            notes = sorted({n for f in files for n in f.get("notes") or []})
            print(
                f"imported {len(files)} files in one commit: {sum(f['samples'] for f in files)} samples "
                f"({sum(f['rows'] for f in files)} values) of {len(nodes)} nodes ({named}) into "
                f"{args.campaign}{_notes({'notes': notes})}"
            )
    elif args.format == "perf-csv":
        from tailscope.importers.perf_csv import import_perf_csv

        start_ns = None
        if getattr(args, "start", None) is not None:
            from tailscope.counters.metrics import parse_time
            from tailscope.errors import InputError

            try:
                start_ns = parse_time(args.start)
            except InputError:
                raise ImportInputError(
                    f"--start {args.start!r}: expected epoch seconds or ISO 8601 (2026-11-24T10:00:00Z)"
                ) from None
        counts = import_perf_csv(path, args.campaign, node=node, start_ns=start_ns)
        guessed = (
            "; start time guessed from the file's modification time minus its last interval (pass --start "
            "or keep perf's '# started on' line for the real one)"
            if counts["start_from"] == "mtime"
            else ""
        )
        print(
            f"imported {counts['samples']} intervals ({counts['rows']} values, {counts['mode']} layout) of "
            f"node {counts['node']} into {args.campaign}{guessed}"
        )
    elif args.format == "likwid-csv":
        from tailscope.importers.likwid_csv import import_likwid_csv

        counts = import_likwid_csv(path, args.campaign, node=node, name=args.name)
        print(
            f"imported {counts['rows']} counter values (trial {counts['trial']}, likwid {counts['likwid']}) "
            f"of node {counts['node']} into {args.campaign}"
        )
    else:
        raise ImportInputError(f"import: unknown format {args.format!r}")
    return 0


def _notes(counts: dict[str, Any]) -> str:
    notes = counts.get("notes") or []
    return "".join(f"; {n}" for n in notes)


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
