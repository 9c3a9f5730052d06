"""Read what the OMPT tool wrote (native/ompt/ts_ompt.c documents the files) and pair its begin/end events
into regions: one row per construct instance per thread, with its nesting depth, times, CPU, socket and
counters."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tailscope.trace import symbols
from tailscope.trace.errors import TraceInputError
from tailscope.trace.topology import Topology

WORK_TYPES = {
    1: "loop",
    2: "sections",
    3: "single",
    4: "single_other",
    5: "workshare",
    6: "distribute",
    7: "taskloop",
    8: "scope",
}
SYNC_TYPES = {
    1: "barrier",
    2: "barrier_implicit",
    3: "barrier_explicit",
    4: "barrier_implementation",
    5: "taskwait",
    6: "taskgroup",
    7: "reduction",
    8: "barrier_implicit_workshare",
    9: "barrier_implicit_parallel",
    10: "barrier_teams",
}


@dataclass
class ToolOutput:
    """The tool's files, parsed."""

    directory: Path
    meta: dict[str, str]
    skipped: list[str]
    threads: pd.DataFrame
    events: pd.DataFrame
    objects: pd.DataFrame
    numa: pd.DataFrame  # snapshot, parallel, tsc, file
    uncore: pd.DataFrame
    counter_names: list[str] = field(default_factory=list)
    touched: pd.DataFrame = field(default_factory=pd.DataFrame)  # parallel, referenced, faults, page_size

    @property
    def pid(self) -> int:
        return int(self.meta.get("pid", 0) or 0)

    @property
    def tsc_hz(self) -> float:
        return float(self.meta["tsc_hz"])

    def mono_ns(self, tsc: pd.Series | int) -> pd.Series | int:
        """CLOCK_MONOTONIC ns of TSC values: linear between the start and end anchors the tool took."""
        t0, t1 = int(self.meta["start_tsc"]), int(self.meta["end_tsc"])
        m0, m1 = int(self.meta["start_mono_ns"]), int(self.meta["end_mono_ns"])
        rate = (m1 - m0) / (t1 - t0) if t1 > t0 else 1e9 / self.tsc_hz
        return (
            (m0 + (tsc - t0) * rate).round().astype("int64")
            if isinstance(tsc, pd.Series)
            else round(m0 + (tsc - t0) * rate)
        )


def _tsv(path: Path, **kwargs: object) -> pd.DataFrame:
    try:
        return pd.read_csv(path, sep="\t", keep_default_na=False, na_values=[""], **kwargs)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise TraceInputError(f"{path}: not a table the OMPT tool writes ({exc})") from exc


def read_tool_output(directory: Path) -> ToolOutput:
    meta_path = directory / "meta.tsv"
    if not meta_path.is_file():
        raise TraceInputError(
            f"{directory}: the OMPT tool wrote nothing (no meta.tsv): the OpenMP runtime did not load it, "
            "or the program ended without finalizing the runtime (exit from a signal, _exit)"
        )
    meta: dict[str, str] = {}
    skipped: list[str] = []
    for n, line in enumerate(meta_path.read_text().splitlines(), 1):
        key, sep, value = line.partition("\t")
        if not sep:
            raise TraceInputError(f"{meta_path}:{n}: expected KEY<TAB>VALUE")
        if key == "skipped":
            skipped.append(value)
        else:
            meta[key] = value
    events = _tsv(directory / "events.tsv", dtype={"tsc": "int64", "offset": "int64"})
    uncore_path = directory / "uncore.tsv"
    numa_path = directory / "numa.tsv"
    touched_path = directory / "touched.tsv"
    return ToolOutput(
        directory=directory,
        meta=meta,
        skipped=skipped,
        threads=_tsv(directory / "threads.tsv"),
        events=events,
        objects=_tsv(directory / "objects.tsv"),
        numa=_tsv(numa_path)
        if numa_path.is_file()
        else pd.DataFrame(columns=["snapshot", "parallel", "tsc"]),
        uncore=_tsv(uncore_path) if uncore_path.is_file() else pd.DataFrame(),
        counter_names=[e for e in meta.get("events", "").split(";") if e],
        touched=_tsv(touched_path)
        if touched_path.is_file()
        else pd.DataFrame(columns=["parallel", "referenced", "faults", "page_size"]),
    )


def read_processes(directory: Path) -> list[ToolOutput]:
    """The traced program's files, then those of every process it forked (DIR/fork-PID/) or started with the
    same environment (DIR/child-PID/), in pid order. Each child's thread and parallel numbers are moved past
    the ones before it, so one run's regions never share a (thread, parallel) key across processes; the
    `process` column of the paired regions says which process ran them. A child that wrote nothing (killed, or
    ended by _exit) is left out: `lost_processes` counts them."""
    outs = [read_tool_output(directory)]
    children = sorted(
        (d for d in directory.iterdir() if d.is_dir() and d.name.split("-")[0] in ("fork", "child")),
        key=lambda d: int(d.name.split("-", 1)[1]) if d.name.split("-", 1)[1].isdigit() else 0,
    )
    for d in children:
        if (d / "meta.tsv").is_file():
            outs.append(read_tool_output(d))
    threads = parallels = snapshots = 0
    for out in outs:
        if threads or parallels:
            out.events["thread"] += threads
            out.threads["thread"] += threads
            out.events.loc[out.events["parallel"] > 0, "parallel"] += parallels
            for table in (out.numa, out.touched, out.uncore):
                if "parallel" in table.columns:
                    table.loc[table["parallel"] > 0, "parallel"] += parallels
            if "snapshot" in out.numa.columns:
                out.numa["snapshot"] += snapshots
        threads = max(threads, int(out.events["thread"].max()) + 1 if len(out.events) else threads)
        parallels = max(parallels, int(out.events["parallel"].max()) if len(out.events) else parallels)
        snapshots += len(out.numa)
    return outs


def lost_processes(directory: Path) -> int:
    """Child processes whose directory holds no meta.tsv: they ended without writing their trace."""
    return sum(
        1
        for d in directory.iterdir()
        if d.is_dir() and d.name.split("-")[0] in ("fork", "child") and not (d / "meta.tsv").is_file()
    )


def _construct(kind: str, sub: int) -> str:
    if kind == "work":
        return WORK_TYPES.get(sub, f"work{sub}")
    if kind == "sync":
        return SYNC_TYPES.get(sub, f"sync{sub}")
    return kind


@dataclass
class Pairing:
    """Regions built from the events, and what did not pair (a broken nesting is counted, not hidden)."""

    regions: pd.DataFrame
    unmatched: int


def pair_regions(out: ToolOutput, topo: Topology) -> Pairing:
    """Pair begin/end per thread with a stack: a region's end must close the innermost open region."""
    ev = out.events
    counters = [c for c in ev.columns if c.startswith("c") and c[1:].isdigit()]
    rows: list[dict[str, object]] = []
    unmatched = 0
    cols = [
        "thread",
        "kind",
        "sub",
        "endpoint",
        "parallel",
        "object",
        "offset",
        "tsc",
        "cpu",
        "node",
        "count",
        "index",
        *counters,
    ]
    for thread, group in ev.groupby("thread", sort=True):
        stack: list[dict[str, object]] = []
        for rec in group[cols].itertuples(index=False, name=None):
            r = dict(zip(cols, rec, strict=True))
            key = (r["kind"], r["sub"], r["parallel"])
            if r["endpoint"] == "begin":
                if (
                    r["kind"] == "sync"
                    and stack
                    and stack[-1]["kind"] == "work"
                    and stack[-1]["sub"] == 3
                    and stack[-1]["parallel"] == r["parallel"]
                ):
                    # gcc's GOMP_single_start has no end call: libomp never reports the end of a `single`
                    # the thread executed; it ends where the construct's barrier begins.
                    b = stack.pop()
                    rows.append(
                        _row(
                            out,
                            counters,
                            int(thread),
                            b,
                            {**r, "kind": "work", "sub": 3},
                            len(stack),
                            inferred=True,
                        )
                    )
                stack.append(r)
                continue
            depth = next(
                (
                    i
                    for i in range(len(stack) - 1, -1, -1)
                    if (stack[i]["kind"], stack[i]["sub"], stack[i]["parallel"]) == key
                ),
                None,
            )
            if depth is None:
                unmatched += 1
                continue
            if depth != len(stack) - 1:
                unmatched += len(stack) - 1 - depth  # regions left open inside this one
            b = stack[depth]
            del stack[depth:]
            rows.append(_row(out, counters, int(thread), b, r, depth, inferred=False))
        unmatched += len(stack)
    regions = pd.DataFrame(rows)
    if regions.empty:
        return Pairing(regions, unmatched)
    regions["process"] = out.pid
    touched = dict(zip(out.touched["parallel"].tolist(), out.touched["referenced"].tolist(), strict=True))
    par_rows = regions["kind"] == "parallel"
    regions["touched_bytes"] = regions["parallel"].map(touched).where(par_rows).astype("Int64")
    regions["socket"] = regions["cpu_begin"].map(topo.socket_of_cpu).astype("int32")
    regions["numa_node"] = regions["cpu_begin"].map(lambda c: topo.cpu_node.get(c, -1)).astype("int32")
    regions["mono_begin_ns"] = out.mono_ns(regions["tsc_begin"])
    regions["mono_end_ns"] = out.mono_ns(regions["tsc_end"])
    regions["seconds"] = (regions["tsc_end"] - regions["tsc_begin"]) / out.tsc_hz
    # implicit tasks carry no code address: they are at their parallel region's
    par = regions[regions["kind"] == "parallel"].set_index("parallel")[["object_index", "offset"]]
    implicit = (regions["kind"] == "implicit_task") & regions["parallel"].isin(par.index)
    regions.loc[implicit, "object_index"] = regions.loc[implicit, "parallel"].map(par["object_index"])
    regions.loc[implicit, "offset"] = regions.loc[implicit, "parallel"].map(par["offset"])
    _resolve(regions, out.objects)
    return Pairing(regions.sort_values(["thread", "tsc_begin", "depth"]).reset_index(drop=True), unmatched)


def pair_processes(outs: list[ToolOutput], topo: Topology) -> Pairing:
    """pair_regions of every process (read_processes), one table."""
    pairings = [pair_regions(out, topo) for out in outs]
    frames = [p.regions for p in pairings if not p.regions.empty]
    regions = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Pairing(regions, sum(p.unmatched for p in pairings))


def _row(
    out: ToolOutput, counters: list[str], thread: int, b: dict, r: dict, depth: int, *, inferred: bool
) -> dict[str, object]:
    """One region from its begin record `b` and end record `r`."""
    obj, off = (b["object"], b["offset"]) if b["object"] >= 0 else (r["object"], r["offset"])
    deltas = {}
    for i, c in enumerate(counters):
        if pd.notna(b[c]) and pd.notna(r[c]):
            deltas[out.counter_names[i] if i < len(out.counter_names) else c] = int(r[c]) - int(b[c])
    kind = str(r["kind"])
    return {
        "thread": thread,
        "kind": kind,
        "construct": _construct(kind, int(r["sub"])),
        "parallel": int(r["parallel"]),
        "depth": depth,
        "object_index": int(obj),
        "offset": int(off),
        "tsc_begin": int(b["tsc"]),
        "tsc_end": int(r["tsc"]),
        "cpu_begin": int(b["cpu"]),
        "cpu_end": int(r["cpu"]),
        "team_size": int(b["count"]) if kind in ("parallel", "implicit_task") else None,
        "thread_num": int(b["index"]) if kind == "implicit_task" else None,
        "iterations": int(b["count"]) if kind == "work" else None,
        "end_inferred": inferred,
        "counters": json.dumps(deltas, sort_keys=True) if deltas else None,
    }


def _resolve(regions: pd.DataFrame, objects: pd.DataFrame) -> None:
    """Add object, function, file, line columns (addr2line on the distinct offsets of each object)."""
    paths = dict(zip(objects["object"], objects["path"], strict=True))
    bases = {o: int(str(b), 16) for o, b in zip(objects["object"], objects["base"], strict=True)}
    regions["object"] = regions["object_index"].map(paths)
    for c in ("function", "file", "line", "symbol", "outlined", "outlined_file", "outlined_line"):
        regions[c] = None
    for obj, group in regions[regions["object_index"] >= 0].groupby("object_index"):
        offsets = sorted({int(o) for o in group["offset"]})
        found = symbols.resolve(paths[obj], bases[obj], offsets)
        for off, loc in found.items():
            mask = (regions["object_index"] == obj) & (regions["offset"] == off)
            regions.loc[mask, ["function", "file", "line", "symbol"]] = (
                loc.function,
                loc.file,
                loc.line,
                loc.symbol,
            )
    _outlined(regions, paths, bases)
    regions["line"] = regions["line"].astype("Int64")
    regions["outlined_line"] = regions["outlined_line"].astype("Int64")
    regions.drop(columns="symbol", inplace=True)


OUTLINED_COLUMNS = ["outlined", "outlined_file", "outlined_line"]


def _outlined(regions: pd.DataFrame, paths: dict, bases: dict) -> None:
    """The outlined function of each parallel region instance (and its implicit tasks): the code address of
    the runtime call can be shared by several regions (clang jumps to one __kmpc_fork_call from two paths) and
    its line can be another construct's (gcc), but the outlined function is the region's own code.
    From the constructs inside the instance (a worksharing or barrier call made from the outlined function:
    its name and the construct's line), else from the DWARF call-site value of the runtime call (gcc
    describes GOMP_parallel's first argument: the outlined function's entry and its first line)."""
    par = (regions["kind"] == "parallel") & (regions["object_index"] >= 0)
    inner = regions[regions["kind"].isin(["work", "sync"]) & regions["symbol"].map(symbols.is_outlined)]
    first = inner.sort_values("tsc_begin").drop_duplicates("parallel").set_index("parallel")
    for src, dst in zip(["symbol", "file", "line"], OUTLINED_COLUMNS, strict=True):
        regions.loc[par, dst] = regions.loc[par, "parallel"].map(first[src])
    missing = par & regions["outlined"].isna()
    for obj, group in regions[missing].groupby("object_index"):
        sites = symbols.call_site_values(paths[obj], bases[obj])
        calls = sorted({int(o) for o in group["offset"]} & set(sites))
        entries = sorted({v + 1 for off in calls for v in sites[off]})  # resolve() looks up offset - 1
        found = symbols.resolve(paths[obj], bases[obj], entries)
        for off in calls:
            loc = next((found.get(v + 1) for v in sites[off] if found.get(v + 1)), None)
            if loc is not None and symbols.is_outlined(loc.symbol):
                mask = missing & (regions["object_index"] == obj) & (regions["offset"] == off)
                regions.loc[mask, OUTLINED_COLUMNS] = (loc.symbol, loc.file, loc.line)
    tasks = regions["kind"] == "implicit_task"
    known = regions[par].drop_duplicates("parallel").set_index("parallel")
    for c in OUTLINED_COLUMNS:
        regions.loc[tasks, c] = regions.loc[tasks, "parallel"].map(known[c])


def region_label(row: pd.Series | dict) -> str:
    """'parallel @ jacobi.c:52 [jacobi+0x1a2b]' (file:line when known, and the code address)."""
    return region_labels(pd.DataFrame([dict(row)]))[0]


def region_labels(regions: pd.DataFrame) -> list[str]:
    """region_label of every row, computed once per distinct code location (traces have millions of rows)."""
    names = ("construct", "file", "line", "object", "offset", "outlined", "outlined_line")
    cols = [regions[c].tolist() if c in regions.columns else [None] * len(regions) for c in names]
    return [
        _label(
            str(c),
            f if isinstance(f, str) and f else None,
            int(ln) if ln is not None and pd.notna(ln) else None,
            o if isinstance(o, str) and o else None,
            int(off) if off is not None and pd.notna(off) else -1,
            fn if isinstance(fn, str) and fn else None,
            int(fl) if fl is not None and pd.notna(fl) else None,
        )
        for c, f, ln, o, off, fn, fl in zip(*cols, strict=True)
    ]


@functools.lru_cache(maxsize=65536)
def _label(
    construct: str,
    file: str | None,
    line: int | None,
    obj: str | None,
    offset: int,
    outlined: str | None = None,
    outlined_line: int | None = None,
) -> str:
    """A region is its code address (the object and offset of codeptr_ra) and, where the line table knows it,
    file:line: an optimising compiler can map distinct constructs to one line (gcc -O2 puts two of three
    GOMP_parallel calls on one line in tests/trace/regions.c), so the address is always part of the name,
    with the outlined function where it is known (and its line in place of the call's)."""
    address = f"{Path(obj).name}+{offset:#x}" if obj and offset >= 0 else None
    if outlined and address:
        address = f"{outlined} {address}"
        line = outlined_line if outlined_line is not None else line
    if file:  # clang gives line 0 ("?") to calls it merged
        where = f"{Path(file).name}:{'?' if line is None else line}" + (f" [{address}]" if address else "")
    elif address:
        where = address
    else:
        where = "runtime"
    return f"{construct} @ {where}"


def region_source(regions: pd.DataFrame) -> dict[str, tuple[str | None, int | None, str | None]]:
    """label -> (file, line, function) of every distinct region in `regions` (for the OTF2 definitions)."""
    out: dict[str, tuple[str | None, int | None, str | None]] = {}
    cols = ["file", "line", "function", "outlined_line"]
    firsts = regions.assign(label=region_labels(regions)).drop_duplicates("label")
    for label, file, line, function, outlined_line in zip(
        firsts["label"], *(firsts[c] if c in firsts else [None] * len(firsts) for c in cols), strict=True
    ):
        if outlined_line is not None and pd.notna(outlined_line):
            line = outlined_line
        out[str(label)] = (
            file if isinstance(file, str) and file else None,
            int(line) if line is not None and pd.notna(line) else None,
            function if isinstance(function, str) and function else None,
        )
    return out
