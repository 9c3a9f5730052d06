"""Where the program's data lives (which NUMA node, hence which socket) against where its threads ran.

Source: copies of /proc/PID/numa_maps the OMPT tool takes after parallel regions (and at exit). A mapping's
`N<node>=<pages>` fields, times `kernelpagesize_kB`, give its bytes per node; the program's data are its
anonymous mappings (heap, stack, anon mmap), not the files it maps (libraries) nor the tool's own buffers
(policy `local`). This needs no counter: the
placement alone tells a Jacobi-style "every page on socket 0" mistake (seed 004).

The placement matrix of one region instance (source `placement-model`) is the least remote traffic the
placement allows: the team's threads touch equal parts of the data (the statically scheduled loops of a
stencil), and each socket's threads take their share from local memory first; what their socket does not hold
comes from the sockets holding more than their own threads' share, in proportion to that surplus. All data on
socket 0 with half the threads on socket 1 gives 50% remote; data placed like the threads gives none. For seed
004's naive Jacobi (4 sockets, one thread each, all data on socket 1) it gives 1/4 of the data from socket 1
to each other socket, the seed's communication matrix. It is a lower bound: threads that touch other threads'
parts of an array add remote traffic the model does not see. Bytes measured by uncore counters are labelled
`uncore`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from tailscope.trace.errors import TraceInputError
from tailscope.trace.topology import Topology

_NODE = re.compile(r"^N(\d+)=(\d+)$")
SOURCE = "placement-model"


@dataclass(frozen=True)
class Snapshot:
    """Bytes per NUMA node of the program's data in one numa_maps copy."""

    snapshot: int
    parallel: int
    tsc: int
    bytes_per_node: dict[int, int]
    mappings: int


def parse_numa_maps(text: str, where: str) -> tuple[dict[int, int], int]:
    """(bytes per node, mappings counted) over the anonymous mappings of one numa_maps text."""
    per_node: dict[int, int] = {}
    counted = 0
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) < 2:
            continue
        try:
            int(fields[0], 16)
        except ValueError as exc:
            raise TraceInputError(
                f"{where}:{n}: expected an address at the start of a numa_maps line"
            ) from exc
        if fields[1] == "local":  # the OMPT tool's own record buffers (mapped with MPOL_LOCAL)
            continue
        attrs = fields[2:]
        is_data = any(a.startswith("anon=") for a in attrs) or "heap" in attrs or "stack" in attrs
        if not is_data or any(a.startswith("file=") for a in attrs):
            continue
        page_kb = 4
        nodes: dict[int, int] = {}
        for a in attrs:
            m = _NODE.match(a)
            if m:
                nodes[int(m.group(1))] = int(m.group(2))
            elif a.startswith("kernelpagesize_kB="):
                page_kb = int(a.split("=", 1)[1])
        if nodes:
            counted += 1
        for node, pages in nodes.items():
            per_node[node] = per_node.get(node, 0) + pages * page_kb * 1024
    return per_node, counted


def read_snapshots(directory: Path, index: pd.DataFrame) -> list[Snapshot]:
    snaps = []
    for row in index.itertuples(index=False):
        path = directory / str(row.file)
        try:
            text = path.read_text()
        except OSError as exc:
            raise TraceInputError(f"{path}: cannot read the numa_maps copy ({exc.strerror})") from exc
        per_node, counted = parse_numa_maps(text, str(path))
        snaps.append(Snapshot(int(row.snapshot), int(row.parallel), int(row.tsc), per_node, counted))
    return sorted(snaps, key=lambda s: s.tsc)


def placement_rows(snaps: list[Snapshot], topo: Topology) -> pd.DataFrame:
    """One row per (snapshot, NUMA node): the store's `placement` table without run_id."""
    rows = [
        {
            "snapshot": s.snapshot,
            "parallel": s.parallel,
            "tsc": s.tsc,
            "numa_node": node,
            "socket": topo.socket_of_node(node),
            "bytes": b,
            "mappings": s.mappings,
        }
        for s in snaps
        for node, b in sorted(s.bytes_per_node.items())
    ]
    return pd.DataFrame(
        rows, columns=["snapshot", "parallel", "tsc", "numa_node", "socket", "bytes", "mappings"]
    )


def snapshot_for(snaps: list[Snapshot], parallel: int, tsc_end: int) -> Snapshot | None:
    """The copy that shows a region instance's data: the one taken right after it, else the latest one taken
    before it ended (an earlier instance of the same code: `first` mode copies only those), else the next
    one (the copy at exit, which may come after the program freed its arrays)."""
    for s in snaps:
        if s.parallel == parallel:
            return s
    before = [s for s in snaps if s.tsc <= tsc_end]
    if before:
        return before[-1]
    return next((s for s in snaps if s.tsc >= tsc_end), None)


def team_per_socket(regions: pd.DataFrame) -> pd.DataFrame:
    """parallel -> socket -> threads of the team that ran there (by the CPU each implicit task began on)."""
    tasks = regions[regions["kind"] == "implicit_task"]
    return tasks.groupby(["parallel", "socket"]).size().rename("threads").reset_index()


def local_first(share: dict[int, float], data: dict[int, float]) -> dict[tuple[int, int], float]:
    """(src socket, dst socket) -> bytes: each socket's demand `share[s]` (bytes its threads touch) served
    from local data first, the rest from the other sockets' surplus in proportion to it.
    Sum of data == sum of share."""
    flows: dict[tuple[int, int], float] = {}
    deficit: dict[int, float] = {}
    surplus: dict[int, float] = {}
    for s in set(share) | set(data):
        want, have = share.get(s, 0.0), data.get(s, 0.0)
        if min(want, have) > 0:
            flows[(s, s)] = min(want, have)
        if want > have:
            deficit[s] = want - have
        elif have > want:
            surplus[s] = have - want
    total_surplus = sum(surplus.values())
    for dst, need in deficit.items():
        for src, extra in surplus.items():
            if total_surplus > 0:
                flows[(src, dst)] = flows.get((src, dst), 0.0) + need * extra / total_surplus
    return flows


def model_traffic(regions: pd.DataFrame, snaps: list[Snapshot], topo: Topology) -> pd.DataFrame:
    """Placement-model bytes per parallel-region instance and (data socket -> thread socket)."""
    cols = ["parallel", "src_socket", "dst_socket", "bytes", "seconds", "source", "event", "link"]
    if not snaps:
        return pd.DataFrame(columns=cols)
    team = team_per_socket(regions)
    par = regions[regions["kind"] == "parallel"].drop_duplicates("parallel")
    touched = touched_per_instance(par)
    ends = dict(zip(par["parallel"].tolist(), par["tsc_end"].tolist(), strict=True))
    seconds = dict(zip(par["parallel"].tolist(), par["seconds"].tolist(), strict=True))
    members: dict[int, list[tuple[int, int]]] = {}
    for pid, sock, n in zip(
        team["parallel"].tolist(), team["socket"].tolist(), team["threads"].tolist(), strict=True
    ):
        members.setdefault(int(pid), []).append((int(sock), int(n)))
    cache: dict[tuple[int, tuple[tuple[int, int], ...]], dict[tuple[int, int], float]] = {}
    rows = []
    for pid, composition in members.items():
        if pid not in ends:
            continue
        snap = snapshot_for(snaps, pid, int(ends[pid]))
        size = sum(n for _, n in composition)
        if snap is None or size == 0:
            continue
        measured = touched.get(pid)
        key = (snap.snapshot, tuple(sorted(composition)), measured)
        if key not in cache:
            data: dict[int, float] = {}
            for node, b in snap.bytes_per_node.items():
                data[topo.socket_of_node(node)] = data.get(topo.socket_of_node(node), 0.0) + float(b)
            footprint = sum(data.values())
            total = footprint if measured is None else float(measured)
            if footprint > 0 and total != footprint:  # the region's own bytes, placed like the program's data
                data = {sock: b * total / footprint for sock, b in data.items()}
            share: dict[int, float] = {}
            for sock, n in composition:
                share[sock] = share.get(sock, 0.0) + total * n / size
            cache[key] = local_first(share, data)
        for (src, dst), b in sorted(cache[key].items()):
            rows.append(
                {
                    "parallel": pid,
                    "src_socket": src,
                    "dst_socket": dst,
                    "bytes": b,
                    "seconds": float(seconds[pid]),
                    "source": SOURCE,
                    "event": None,
                    "link": None,
                }
            )
    return pd.DataFrame(rows, columns=cols)


def touched_per_instance(par: pd.DataFrame) -> dict[int, int]:
    """parallel -> bytes the instance touched: its own measure (touched_bytes, measured by the OMPT tool on
    the first two instances of each code address, or on every one), else the last measure before it of the
    same code address in the same process (the first instance may include the runtime starting threads).
    Instances of a region never measured are left out (their traffic is modelled over the program's whole
    footprint, and labelled so)."""
    if "touched_bytes" not in par.columns:
        return {}
    par = par.assign(process=par["process"] if "process" in par.columns else 0)
    keys = ["process", "object_index" if "object_index" in par.columns else "object", "offset"]
    keys += ["outlined"] if "outlined" in par.columns else []
    if not par["touched_bytes"].notna().any():
        return {}
    out: dict[int, int] = {}
    last: dict[tuple, int] = {}
    ordered = par.sort_values("parallel")[["parallel", "touched_bytes", *keys]]
    for row in ordered.itertuples(index=False):
        own, key = row[1], tuple(row[2:])
        if own is not None and pd.notna(own):
            out[int(row[0])] = last[key] = int(own)
        elif key in last:
            out[int(row[0])] = last[key]
    return out


def process_traffic(regions: pd.DataFrame, snaps: dict[int, list[Snapshot]], topo: Topology) -> pd.DataFrame:
    """model_traffic of each process (the traced program and the children it forked) over its own copies."""
    if "process" not in regions.columns or len(snaps) <= 1:
        return model_traffic(regions, next(iter(snaps.values()), []), topo)
    frames = [
        model_traffic(regions[regions["process"] == pid], own, topo) for pid, own in sorted(snaps.items())
    ]
    return pd.concat([f for f in frames if not f.empty] or frames[:1], ignore_index=True)


@dataclass(frozen=True)
class Finding:
    """A placement verdict: what is wrong (or that nothing can be), and what to do."""

    kind: str  # "single-node" | "imbalanced" | "balanced"
    text: str
    remote_fraction: float


ADVICE = (
    "initialise the data in parallel with the same schedule as the loops that use it (first touch places "
    "each "
    "page on the node of the thread that writes it first), or run under `numactl --interleave=all`; bind the "
    "threads (OMP_PROC_BIND=close or spread, OMP_PLACES=cores) so they stay where their pages are"
)


def finding(traffic: pd.DataFrame, topo: Topology, *, majority: float = 0.75) -> Finding:
    """One socket holding most of the data that threads of other sockets work on is the seed's finding."""
    if len(topo.nodes) <= 1:
        return Finding(
            "single-node",
            "one NUMA node: every memory access is local; placement costs nothing "
            "on this machine (run on a multi-socket node to see remote traffic)",
            0.0,
        )
    model = traffic[traffic["source"] == SOURCE]
    total = float(model["bytes"].sum())
    if total <= 0:
        return Finding("balanced", "no data pages seen in numa_maps", 0.0)
    remote = float(model.loc[model["src_socket"] != model["dst_socket"], "bytes"].sum())
    fraction = remote / total
    by_src = model.groupby("src_socket")["bytes"].sum() / total
    by_dst = model.groupby("dst_socket")["bytes"].sum() / total
    top = int(by_src.idxmax())
    others = float(by_dst.drop(top, errors="ignore").sum())
    if by_src.max() >= majority and others > 1 - majority:
        return Finding(
            "imbalanced",
            f"socket {top} holds {by_src.max():.0%} of the data while the threads of other sockets touch "
            f"{others:.0%} of it: {fraction:.0%} of the bytes touched are remote. Advice: {ADVICE}",
            fraction,
        )
    return Finding(
        "balanced", f"data spread over the sockets the threads run on; {fraction:.0%} remote", fraction
    )
