"""CLI glue for the importers and the exporter: `import FORMAT FILE... --campaign DIR` and `export perfcounts
DIR -o FILE`. Every format is one row of FORMATS (name -> handler with one signature: the request in, the
line to print out); `run_import` checks what every format shares (the files, --node) and dispatches through
the table. Errors are ImportInputError (exit 2 through cli._ERRORS)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tailscope.importers import ImportInputError
from tailscope.importers.reader import PROGRAM_FORMATS

COUNTER_FORMATS = ("perfcounts", "perf-csv", "likwid-csv")


@dataclass(frozen=True)
class ImportRequest:
    """What `tailscope import` was asked, the same for every format (each ignores what it does not use)."""

    format: str
    paths: list[Path]
    campaign: Path
    node: str | None  # --node, checked; None: the format's own rule (the file's, else this host's name)
    args: argparse.Namespace  # the format's own options (--name, --unit, --start ...)


@dataclass(frozen=True)
class ImportFormat:
    name: str
    handler: Callable[[ImportRequest], str]  # stores the files, returns the one line to print
    help: str
    many_files: bool = False


def _iterations(req: ImportRequest) -> str:
    from tailscope.importers.iterations_csv import import_iterations

    args = req.args
    counts = import_iterations(
        req.paths[0], req.campaign, name=args.name, unit=args.unit, higher_is_better=args.higher_is_better
    )
    return (
        f"imported {counts['runs']} runs ({counts['iterations']} iterations, {counts['nodes']} nodes) "
        f"into {req.campaign}"
    )


def _program(req: ImportRequest) -> str:
    from tailscope.importers.programs import import_program
    from tailscope.node.facts import node_name
    from tailscope.store.campaign import new_task_id
    from tailscope.store.load import load_into

    path = req.paths[0]
    name = getattr(req.args, "name", None)
    with load_into(req.campaign, f"import {req.format} {path.name}", create=True) as load:
        counts = import_program(
            path, load, format=req.format, node=req.node or node_name(), task=new_task_id(), name=name
        )
    if req.format in ("hpl", "hpcc"):
        return (
            f"imported {counts['runs']} HPL runs ({counts['invalid']} failed the residual check, "
            f"{counts['variants']} problem sizes) into {req.campaign}"
        )
    invalid = f", {counts['invalid']} invalid" if counts["invalid"] else ""
    return (
        f"imported {counts['runs']} {req.format} runs ({counts['variants']} variants{invalid}) "
        f"into {req.campaign}"
    )


def _perfcounts(req: ImportRequest) -> str:
    from tailscope.importers.perfcounts import import_perfcounts_files

    files = import_perfcounts_files(req.paths, req.campaign, node=req.node)
    if len(files) == 1:
        counts = files[0]
        return (
            f"imported {counts['samples']} samples ({counts['rows']} values, {counts['series']} series) "
            f"of node {counts['node']} into {req.campaign}{_notes(counts)}"
        )
    nodes = [f["node"] for f in files]
    named = ", ".join(nodes) if len(nodes) <= 4 else f"{nodes[0]}, {nodes[1]} .. {nodes[-1]}"
    notes = sorted({n for f in files for n in f.get("notes") or []})
    return (
        f"imported {len(files)} files in one commit: {sum(f['samples'] for f in files)} samples "
        f"({sum(f['rows'] for f in files)} values) of {len(nodes)} nodes ({named}) into "
        f"{req.campaign}{_notes({'notes': notes})}"
    )


def _perf_csv(req: ImportRequest) -> str:
    from tailscope.importers.perf_csv import import_perf_csv

    start_ns = None
    start = getattr(req.args, "start", None)
    if start is not None:
        from tailscope.counters.metrics import parse_time
        from tailscope.errors import InputError

        try:
            start_ns = parse_time(start)
        except InputError:
            raise ImportInputError(
                f"--start {start!r}: expected epoch seconds or ISO 8601 (2026-11-24T10:00:00Z)"
            ) from None
    counts = import_perf_csv(req.paths[0], req.campaign, node=req.node, start_ns=start_ns)
    guessed = (
        "; start time guessed from the file's modification time minus its last interval (pass --start "
        "or keep perf's '# started on' line for the real one)"
        if counts["start_from"] == "mtime"
        else ""
    )
    return (
        f"imported {counts['samples']} intervals ({counts['rows']} values, {counts['mode']} layout) of "
        f"node {counts['node']} into {req.campaign}{guessed}"
    )


def _likwid_csv(req: ImportRequest) -> str:
    from tailscope.importers.likwid_csv import import_likwid_csv

    counts = import_likwid_csv(req.paths[0], req.campaign, node=req.node, name=req.args.name)
    return (
        f"imported {counts['rows']} counter values (trial {counts['trial']}, likwid {counts['likwid']}) "
        f"of node {counts['node']} into {req.campaign}"
    )


_PROGRAM_HELP = {
    "hpl": "xhpl output or hpcc's hpccoutf.txt",
    "hpcc": "hpcc's hpccoutf.txt (its HPL section)",
    "lammps": "LAMMPS log or stdout (Loop time, Performance, thermo lines)",
    "gromacs": "GROMACS md.log or mdrun's stderr (Performance: ns/day)",
    "stream": "STREAM's output (Copy/Scale/Add/Triad best rates)",
    "npb": "a NAS Parallel Benchmark's output (Mop/s total)",
    "osu": "an OSU micro-benchmark's size/latency or bandwidth table",
}

FORMATS: dict[str, ImportFormat] = {
    f.name: f
    for f in (
        ImportFormat("iterations", _iterations, "CSV node,run,iteration,value[,unit,...]"),
        *(ImportFormat(name, _program, _PROGRAM_HELP.get(name, name)) for name in PROGRAM_FORMATS),
        ImportFormat("perfcounts", _perfcounts, "the seed sampler's text", many_files=True),
        ImportFormat("perf-csv", _perf_csv, "perf stat -I -x, output"),
        ImportFormat("likwid-csv", _likwid_csv, "likwid-perfctr -O output"),
    )
}


def run_import(args: argparse.Namespace) -> int:
    """The `import` verb (called from cli.cmd_import): one line saying what was stored, or exit 2."""
    fmt = FORMATS.get(args.format)
    if fmt is None:
        raise ImportInputError(
            f"import: unknown format {args.format!r} (expected one of {', '.join(FORMATS)})"
        )
    paths: list[Path] = args.file  # one or more (cli.py: nargs="+")
    for path in paths:
        if path.exists() and not path.is_file():
            raise ImportInputError(f"{path}: not a regular file (expected the {args.format} file to import)")
        if not path.is_file():
            raise ImportInputError(f"{path}: no such file")
    if len(paths) > 1 and not fmt.many_files:
        many = ", ".join(f.name for f in FORMATS.values() if f.many_files)
        raise ImportInputError(
            f"import {args.format}: {len(paths)} files given, expected one (only {many} takes several)"
        )
    node = getattr(args, "node", None)
    if node is not None:
        if not node.strip():
            raise ImportInputError(f"--node {node!r}: expected a node name (or leave --node out)")
        from tailscope.importers.rows import check_node

        check_node(node, "--node")
    print(fmt.handler(ImportRequest(args.format, paths, args.campaign, node, args)))
    return 0


def _notes(counts: dict[str, Any]) -> str:
    notes = counts.get("notes") or []
    return "".join(f"; {n}" for n in notes)


def format_help() -> str:
    return "; ".join(f"{f.name}: {f.help}" for f in FORMATS.values())


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
