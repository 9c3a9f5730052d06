"""Where the program's data lives (which NUMA node, hence which socket) against where its threads ran.

Source: copies of /proc/PID/numa_maps the OMPT tool takes after parallel regions (and at exit). A mapping's
`N<node>=<pages>` fields, times `kernelpagesize_kB`, give its bytes per node; the program's data are its
anonymous mappings (heap, stack, anon mmap), not the files it maps (libraries) nor the tool's own buffers
(policy `local`). This needs no counter: the
placement alone tells a Jacobi-style "every page on socket 0" mistake (seed 004).

The placement matrix of one region instance is M[s][d] = (share of the team's time spent on socket s) x (bytes
on socket d): the bytes the threads of socket s would pull from socket d if each thread touches the data in
proportion to its time, which is the case for the balanced loops of a stencil. The remote fraction is the
off-diagonal share. It is labelled `placement-model`; bytes measured by uncore counters are labelled by event.
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


def snapshot_after(snaps: list[Snapshot], tsc: int) -> Snapshot | None:
    """The first snapshot taken at or after `tsc` (the one that shows the region's data after it ran)."""
    return next((s for s in snaps if s.tsc >= tsc), snaps[-1] if snaps else None)


def team_time_per_socket(regions: pd.DataFrame) -> pd.DataFrame:
    """parallel -> socket -> seconds the team's implicit tasks spent there (by the CPU each began on)."""
    tasks = regions[regions["kind"] == "implicit_task"]
    return tasks.groupby(["parallel", "socket"])["seconds"].sum().rename("seconds").reset_index()


def model_traffic(regions: pd.DataFrame, snaps: list[Snapshot], topo: Topology) -> pd.DataFrame:
    """Placement-model bytes per parallel-region instance and (data socket -> thread socket)."""
    cols = ["parallel", "src_socket", "dst_socket", "bytes", "seconds", "source", "event", "link"]
    if not snaps:
        return pd.DataFrame(columns=cols)
    team = team_time_per_socket(regions)
    parallels = regions[regions["kind"] == "parallel"].set_index("parallel")
    rows = []
    for pid, group in team.groupby("parallel"):
        if pid not in parallels.index:
            continue
        region = parallels.loc[pid]
        snap = snapshot_after(snaps, int(region["tsc_end"]))
        if snap is None:
            continue
        total_time = float(group["seconds"].sum())
        if total_time <= 0:
            continue
        data: dict[int, int] = {}
        for node, b in snap.bytes_per_node.items():
            data[topo.socket_of_node(node)] = data.get(topo.socket_of_node(node), 0) + b
        for dst, secs in zip(group["socket"], group["seconds"], strict=True):
            for src, b in data.items():
                rows.append(
                    {
                        "parallel": int(pid),
                        "src_socket": int(src),
                        "dst_socket": int(dst),
                        "bytes": float(b) * float(secs) / total_time,
                        "seconds": float(region["seconds"]),
                        "source": SOURCE,
                        "event": None,
                        "link": None,
                    }
                )
    return pd.DataFrame(rows, columns=cols)


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
            f"socket {top} holds {by_src.max():.0%} of the data while {others:.0%} of the team's time is "
            f"spent on "
            f"other sockets: {fraction:.0%} of the bytes touched are remote. Advice: {ADVICE}",
            fraction,
        )
    return Finding(
        "balanced", f"data spread over the sockets the threads run on; {fraction:.0%} remote", fraction
    )
