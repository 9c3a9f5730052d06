"""`tailscope addr <verb>`: map, properties, infer, measure, explain.

`add_addr_parser(subparsers)` registers the verbs; each verb function returns an exit code (0 ok) and
raises AddrInputError (exit 2, one line naming FILE:LINE where there is one) for bad input.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tailscope.addr.errors import AddressRangeError, AddrInputError
from tailscope.addr.table_names import builtin_names
from tailscope.jsonout import write_json

if TYPE_CHECKING:  # the commands import numpy and the address code when they run, not `tailscope --help`
    from tailscope.addr.infer import InferenceResult
    from tailscope.addr.model import SliceHashModel
    from tailscope.addr.properties import BlockUniformity

EXIT_OK = 0


# --- model options ---------------------------------------------------------------------------------------
def _add_model_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("slice-hash model (default: the built-in model detected for this node)")
    g.add_argument("--base-sequence", type=Path, metavar="FILE", help="BaseSequence_*.tbl")
    g.add_argument("--masks", type=Path, metavar="FILE", help="PermSelectMasks_*.tbl")
    g.add_argument("--model", metavar="NAME", help=f"a built-in model: {', '.join(builtin_names())}")


def _model(
    args: argparse.Namespace, *, required: bool = True, campaign: Path | None = None
) -> SliceHashModel | None:
    """The model the options name, else this node's detected model. For a campaign's pages detection is
    used only when every trial ran on this node: another node's CHA count is not known here."""
    from tailscope.addr.addresses import campaign_nodes
    from tailscope.addr.detect import detect
    from tailscope.addr.tables import builtin_model, load_model
    from tailscope.node.facts import node_name

    if (args.base_sequence is None) != (args.masks is None):
        raise AddrInputError("--base-sequence and --masks go together: give both table files or neither")
    if args.base_sequence is not None:
        if args.model:
            raise AddrInputError("give either --model or the two table files, not both")
        return load_model(args.base_sequence, args.masks)
    if args.model:
        return builtin_model(args.model)
    if campaign is not None:
        here = node_name()
        others = [n for n in campaign_nodes(campaign) if n != here]
        if others:
            if required:
                names = ", ".join(others[:3]) + (" ..." if len(others) > 3 else "")
                raise AddrInputError(
                    f"{campaign} ran on {names}, not on this node: name their slice-hash model with --model "
                    "or --base-sequence/--masks"
                )
            return None
    found = detect()
    if found.slice_model is None:
        if required:
            raise AddrInputError(f"cannot choose a slice-hash model for this node: {found.reason}")
        return None
    return found.slice_model


def _model_json(model: SliceHashModel) -> dict[str, Any]:
    return {
        "name": model.name,
        "source": model.source,
        "slices": model.n_slices,
        "base_length": model.length,
        "low_bit": model.low_bit,
        "high_bit": model.high_bit,
        "valid_below": hex(model.valid_limit),
        "masks": [hex(model.mask(k)) for k in range(model.index_bits)],
        "span": [{"mask": hex(m), "parity": v} for m, v in model.span],
        "covered_below": None if model.covered_high_bit is None else hex(1 << (model.covered_high_bit + 1)),
    }


def _describe(model: SliceHashModel) -> str:
    return (
        f"{model.name} ({model.source}): {model.n_slices} slices, base sequence {model.length} lines, "
        f"{model.describe_range()}"
    )


def _emit_json(data: Any, out: TextIO) -> None:
    write_json(data, out, default=_json_default)


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --- map ---------------------------------------------------------------------------------------------------
def cmd_map(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tailscope.addr.addresses import map_or_refuse, parse_address_args, read_address_file
    from tailscope.addr.kernel import format_lines

    sources = sum(x is not None and x != [] for x in (args.addresses, args.input, args.campaign))
    if sources != 1:
        raise AddrInputError(
            "give the addresses as arguments, or --input FILE, or --campaign DIR (one of them)"
        )
    model = _model(args, campaign=args.campaign)
    assert model is not None
    if args.campaign is not None:
        return _map_campaign(model, args.campaign, args.json, out)
    if args.input is not None:
        addresses = read_address_file(args.input)
        where = "<stdin>" if str(args.input) == "-" else str(args.input)
        slices = map_or_refuse(model.hash, addresses, where)
    else:
        addresses = parse_address_args(args.addresses)
        try:
            slices = model.slices(addresses)
        except AddressRangeError as exc:
            raise AddrInputError(f"argument {exc.position + 1}: {exc}") from None
    if args.json:
        _emit_json(
            {
                "model": _model_json(model),
                "addresses": [
                    {"address": hex(int(a)), "slice": int(s)} for a, s in zip(addresses, slices, strict=True)
                ],
            },
            out,
        )
    else:
        out.write(format_lines(slices))
    return EXIT_OK


def _map_campaign(model: SliceHashModel, campaign: Path, as_json: bool, out: TextIO) -> int:
    import numpy as np

    from tailscope.addr.addresses import campaign_pages, campaign_virtual_nodes
    from tailscope.addr.properties import page_slice_counts
    from tailscope.node.hugepages import vm_statement

    pages = campaign_pages(campaign)
    if pages.empty:
        raise AddrInputError(
            f"{campaign}: no physical pages were recorded: probes read frame numbers from "
            "/proc/self/pagemap, which gives them only to root (CAP_SYS_ADMIN); "
            "run the campaign as root, without --no-pages"
        )
    pa = pages["physical_address"].to_numpy(dtype=np.int64).astype(np.uint64)
    try:
        first = model.slices(pa)
        counts = page_slice_counts(model, pa, pages["page_size"].to_numpy(np.uint64))
    except AddressRangeError as exc:
        row = pages.iloc[min(exc.position, len(pages) - 1)]
        raise AddrInputError(f"{campaign}: run {row['run_id']}: {exc}") from None
    virtual = campaign_virtual_nodes(campaign)
    notes = [vm_statement(virtual)] if virtual else []
    if as_json:
        rows = []
        for i, row in enumerate(pages.itertuples(index=False)):
            rows.append(
                {
                    "run_id": row.run_id,
                    "node": row.node,
                    "trial": int(row.trial),
                    "array": row.array,
                    "thread": _thread(row.thread),
                    "physical_address": hex(int(row.physical_address)),
                    "page_size": int(row.page_size),
                    "slice": int(first[i]),
                    "lines_per_slice": counts[i].tolist(),
                }
            )
        _emit_json({"model": _model_json(model), "notes": notes, "pages": rows}, out)
        return EXIT_OK
    for note in notes:  # stderr: stdout stays one table
        print(f"note: {note}", file=sys.stderr)
    out.write("run_id\tarray\tthread\tphysical_address\tpage_size\tslice\n")
    for i, row in enumerate(pages.itertuples(index=False)):
        thread = "" if _thread(row.thread) is None else str(_thread(row.thread))
        out.write(
            f"{row.run_id}\t{row.array}\t{thread}\t0x{int(row.physical_address):x}\t{int(row.page_size)}\t{int(first[i])}\n"
        )
    return EXIT_OK


def _thread(value: object) -> int | None:
    """A page's thread, None when the probe did not say (None, NaN or pandas' NA)."""
    import pandas as pd

    return None if pd.isna(value) else int(value)  # type: ignore[call-overload]


# --- properties ----------------------------------------------------------------------------------------
def _slice_ranges(counts: tuple[int, ...]) -> str:
    groups: dict[int, list[int]] = {}
    for s, c in enumerate(counts):
        groups.setdefault(c, []).append(s)
    parts = []
    for c, slices in sorted(groups.items()):
        runs, start = [], slices[0]
        for a, b in zip(slices, [*slices[1:], None], strict=True):
            if b != a + 1:
                runs.append(f"{start}-{a}" if a != start else f"{a}")
                start = b
        parts.append(f"{c} lines on slice{'s' if len(slices) > 1 else ''} {','.join(runs)}")
    return "; ".join(parts)


def cmd_properties(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tailscope.addr.addresses import campaign_pages
    from tailscope.addr.properties import block_uniformity, slice_loads

    model = _model(args, campaign=args.campaign)
    assert model is not None
    uni = block_uniformity(model)
    loads = None
    if args.campaign is not None:
        pages = campaign_pages(args.campaign)
        try:
            loads = {
                "pages": slice_loads(model, pages, ()),
                "runs": slice_loads(model, pages, ("run_id",)),
                "threads": slice_loads(model, pages, ("run_id", "thread")),
            }
        except AddressRangeError as exc:
            raise AddrInputError(f"{args.campaign}: {exc}") from None
    if args.json:
        data: dict[str, Any] = {"model": _model_json(model), "uniformity": asdict(uni)}
        if loads is not None:
            data["slice_loads"] = {k: v.to_dict(orient="records") for k, v in loads.items()}
        _emit_json(data, out)
        return EXIT_OK
    out.write(_properties_text(model, uni))
    if loads is not None:
        runs = loads["runs"]
        threads = loads["threads"]
        out.write(f"\nslice loads of {len(loads['pages'])} pages in {len(runs)} runs of {args.campaign}:\n")
        out.write("run_id\tpages\tlines\tslice imbalance\tworst thread-chunk imbalance\n")
        worst = threads.groupby("run_id")["imbalance"].max()
        for row in runs.itertuples(index=False):
            out.write(
                f"{row.run_id}\t{row.pages}\t{row.lines}\t{row.imbalance:.4f}\t"
                f"{worst.get(row.run_id, float('nan')):.4f}\n"
            )
    return EXIT_OK


def _properties_text(model: SliceHashModel, uni: BlockUniformity) -> str:
    from tailscope.addr.model import format_bytes

    n = model.n_slices
    lines = [
        f"model {_describe(model)}",
        f"uniform block: every aligned block of {uni.block_lines} lines "
        f"({format_bytes(uni.block_lines * 64)}) "
        f"puts {_slice_ranges(uni.lines_per_slice)} (uniform would be {uni.block_lines / n:.4g})",
        f"capacity fraction lost to non-uniformity: {uni.fraction_lost:.2%} "
        f"(the most loaded slices fill up that much before the aggregate is full)",
        f"permutations of the base sequence: {uni.permutations} "
        f"({uni.distinct_sequences} distinct block sequences)",
    ]
    if uni.symmetries:
        lines.append(
            f"XOR symmetries of the base sequence: {', '.join(map(str, uni.symmetries))} "
            "(masks are defined only modulo these)"
        )
    return "\n".join(lines) + "\n"


# --- infer ----------------------------------------------------------------------------------------------
def cmd_infer(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tailscope.addr.addresses import read_samples
    from tailscope.addr.infer import InferSettings, infer
    from tailscope.addr.tables import write_tables

    samples = read_samples(args.samples)
    settings = InferSettings(
        max_error=args.max_error,
        holdout=args.holdout,
        min_coverage=args.min_coverage,
        seed=args.seed,
        name=args.name,
    )
    result = infer(samples.addresses, samples.slices, settings)
    stem = f"{args.name}_{result.model.n_slices}-slice"
    # the table format says only "valid below 2^(h+1)": write the largest whole range the span covers
    tables = result.model.covered_model()
    if tables is None:
        raise AddrInputError(
            f"{samples.source}: the measured frames determine the map only on their span "
            f"({result.model.describe_range()}); the table format cannot hold that: measure more "
            "2 MiB frames (a few dozen at random addresses usually span every address bit)"
        )
    base_path, masks_path = write_tables(tables, args.output, stem)
    if args.json:
        data = asdict(result)
        data["model"] = _model_json(result.model)
        data["tables_model"] = _model_json(tables)
        data["held_back_accuracy"] = result.held_back_accuracy
        data["written"] = [str(base_path), str(masks_path)]
        _emit_json(data, out)
    else:
        out.write(_infer_text(result, samples.source, base_path, masks_path))
        if tables is not result.model:
            out.write(f"tables hold the model on {tables.describe_range()} only\n")
    return EXIT_OK


def _infer_text(r: InferenceResult, source: str, base_path: Path, masks_path: Path) -> str:
    m = r.model
    lines = [
        f"inferred a {m.n_slices}-slice model from {source} ({r.method} method): "
        f"base sequence {m.length} lines, "
        f"{m.describe_range()}",
        f"samples: {r.samples} read, {r.lines} distinct lines "
        f"({r.conflicting_lines} measured with conflicting "
        f"slices), {r.training_lines} used to fit, {r.held_back} held back",
        f"needed: the first {r.lines_needed} fitting lines already determine the model"
        + (f" ({r.blocks_used} aligned blocks of {m.length} lines used)" if r.method == "blocks" else ""),
        f"fit: the model maps {r.training_disagreements} fitting lines "
        f"({r.training_disagreements / max(r.training_lines, 1):.2%}) "
        "to another slice than measured (wrong labels)",
    ]
    if r.held_back:
        acc = r.held_back_accuracy
        lines.append(
            f"held back: {r.held_back} lines, "
            + (f"{acc:.2%} predicted correctly" if acc is not None else "none predictable")
            + (f", {r.held_back_outside} beyond the valid range" if r.held_back_outside else "")
        )
    else:
        lines.append("held back: nothing (too few 2 MiB frames, or --holdout 0)")
    never = r.top_data_bit + 1
    lines.append(
        f"undetermined: address bits {never} and above never vary in the data"
        + (f"; also bits {', '.join(map(str, r.undetermined_bits))}" if r.undetermined_bits else "")
    )
    lines.extend(f"note: {n}" for n in r.notes)
    lines.append(f"wrote {base_path} and {masks_path}")
    return "\n".join(lines) + "\n"


# --- measure --------------------------------------------------------------------------------------------
def cmd_measure(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tailscope.addr.measure import MeasureSettings, PerfChaCounterSource, SimulatedCounterSource, measure
    from tailscope.addr.tables import builtin_model

    settings = MeasureSettings(
        pages=args.pages,
        rounds=args.rounds,
        dominance=args.dominance,
        min_fraction=args.min_fraction,
        retries=args.retries,
        backoff_s=args.backoff,
    )
    settings.check()
    source = (
        SimulatedCounterSource(builtin_model(args.simulate), seed=args.seed)
        if args.simulate
        else PerfChaCounterSource()
    )
    summary = measure(
        source,
        args.output,
        settings,
        progress=(lambda s: print(s, file=sys.stderr)) if args.verbose else None,
    )
    out.write(
        f"{args.output}: {summary.pages_complete} complete 2 MiB pages (wanted {settings.pages}, "
        f"{summary.pages_complete_before} before this run); "
        f"this run: {summary.lines_measured} lines measured, "
        f"{summary.lines_skipped} already in the file, {summary.lines_failed} without a dominant CHA after "
        f"{settings.retries} retries (not written; a rerun tries them again)\n"
    )
    return EXIT_OK


# --- explain --------------------------------------------------------------------------------------------
def cmd_explain(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    from tailscope.addr.explain import ExplainSettings, explain, render
    from tailscope.addr.snoop import SnoopFilterModel

    model = _model(args, required=False, campaign=args.campaign)
    masks = tuple(int(m, 16) for m in args.sf_set_masks.split(",")) if args.sf_set_masks else ()
    sf = SnoopFilterModel(
        sets=args.sf_sets, ways=args.sf_ways, set_masks=masks, l2_bytes=args.l2_bytes, l2_ways=args.l2_ways
    )
    settings = ExplainSettings(
        threshold=args.threshold,
        order=args.order,
        permutations=args.permutations,
        alpha=args.alpha,
        seed=args.seed,
    )
    result = explain(args.campaign, model, sf, settings)
    if args.json:
        _emit_json(asdict(result), out)
    else:
        out.write(render(result) + "\n")
    return EXIT_OK


def _hex_list(text: str) -> str:
    for part in text.split(","):
        try:
            int(part, 16)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated hexadecimal masks, got {part!r}"
            ) from None
    return text


# --- the parser ---------------------------------------------------------------------------------------------
def add_addr_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `addr` and its verbs on a `parser.add_subparsers()` object; returns the `addr` parser."""
    addr = subparsers.add_parser(
        "addr", help="physical addresses and the L3 slice hash: map, properties, infer, measure, explain"
    )
    verbs = addr.add_subparsers(dest="addr_command", metavar="VERB", required=True)

    p = verbs.add_parser("map", help="slice of each physical address (one slice id per line, input order)")
    p.add_argument("addresses", nargs="*", metavar="ADDR", help="physical addresses (0x... or decimal)")
    p.add_argument("--input", metavar="FILE", help="one address per line ('-' reads stdin)")
    p.add_argument("--campaign", type=Path, metavar="DIR", help="the recorded pages of a campaign")
    p.add_argument("--json", action="store_true", help="richer output: the model and each address's slice")
    _add_model_options(p)
    p.set_defaults(func=cmd_map)

    p = verbs.add_parser(
        "properties", help="uniform block, lines per slice, capacity lost; slice loads of a campaign"
    )
    p.add_argument(
        "--campaign", type=Path, metavar="DIR", help="also slice loads per page, run and thread chunk"
    )
    p.add_argument("--json", action="store_true")
    _add_model_options(p)
    p.set_defaults(func=cmd_properties)

    p = verbs.add_parser("infer", help="a model from measured address,slice pairs (CSV)")
    p.add_argument("samples", metavar="SAMPLES.csv", help="CSV with columns address,slice ('-' reads stdin)")
    p.add_argument(
        "-o", "--output", type=Path, required=True, metavar="DIR", help="where to write the .tbl files"
    )
    p.add_argument("--name", default="inferred", help="file name stem (default: inferred)")
    p.add_argument(
        "--max-error", type=float, default=0.05, metavar="F", help="fraction of wrong labels tolerated"
    )
    p.add_argument(
        "--holdout", type=float, default=0.1, metavar="F", help="fraction of 2 MiB frames held back"
    )
    p.add_argument(
        "--min-coverage", type=float, default=0.9, metavar="F", help="measured fraction of a block to use it"
    )
    p.add_argument("--seed", type=int, help="seed of the random choices (hold-back, subsets)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_infer)

    p = verbs.add_parser("measure", help="measure slices through uncore CHA counters (bare-metal Xeon, root)")
    p.add_argument(
        "-o", "--output", type=Path, required=True, metavar="MAP.csv", help="appended; reruns resume"
    )
    p.add_argument(
        "--pages", type=int, default=32, metavar="N", help="complete 2 MiB pages wanted in the file"
    )
    p.add_argument("--rounds", type=int, default=1000, help="load+flush rounds per line and reading")
    p.add_argument("--dominance", type=float, default=0.95, help="the winning CHA's share of lookups")
    p.add_argument("--min-fraction", type=float, default=0.9, help="the winning CHA's lookups / rounds")
    p.add_argument("--retries", type=int, default=100)
    p.add_argument(
        "--backoff", type=float, default=0.001, metavar="S", help="first back-off (doubles, <= 0.1 s)"
    )
    p.add_argument(
        "--simulate", metavar="MODEL", help="simulate a node with this built-in model (no hardware)"
    )
    p.add_argument("--seed", type=int)
    p.add_argument("-v", "--verbose", action="store_true", help="progress per page on stderr")
    p.set_defaults(func=cmd_measure)

    p = verbs.add_parser("explain", help="does a campaign's slowness depend on its physical pages?")
    p.add_argument("campaign", type=Path, metavar="CAMPAIGN")
    p.add_argument("--threshold", type=float, default=0.05, help="slow: more than this below the node median")
    p.add_argument("--order", type=int, default=2, help="parities of up to this many frame bits")
    p.add_argument("--permutations", type=int, default=999)
    p.add_argument("--alpha", type=float, default=0.01, help="report parities with adjusted p <= this")
    p.add_argument("--seed", type=int)
    p.add_argument("--json", action="store_true")
    g = p.add_argument_group("snoop-filter model (defaults: SKX/CLX as reported by others)")
    g.add_argument("--sf-sets", type=int, default=2048, help="sets per slice")
    g.add_argument("--sf-ways", type=int, default=12)
    g.add_argument(
        "--sf-set-masks", type=_hex_list, metavar="M0,M1,...", help="set index bit k = parity(PA & Mk)"
    )
    g.add_argument("--l2-bytes", type=int, default=1 << 20)
    g.add_argument("--l2-ways", type=int, default=16)
    _add_model_options(p)
    p.set_defaults(func=cmd_explain)
    return addr
