"""OTF2 archive for Vampir and other Score-P readers (seed 004's presentation).

Each socket is a process (location group) with one location `socket S` that enters and leaves the parallel
regions, as seen from the thread that started them, and carries the traffic: the bytes a region moved from
socket A to socket B are an MPI message sent by A when the region begins and received by B when it ends,
whose communicator is the bandwidth bin (so Vampir's communicator filter hides the noise, as in the seed) and
whose length is the bytes; the receiving socket also carries a metric `bytes/s socket A -> B` (the region's
rate while it runs, 0 after). The OpenMP threads are further locations (`thread T`) in the group of the socket
they started on, with every region nested as recorded (`thread T (pid P)` for the threads of a process the
program forked). Each region definition carries its source file and line (OTF2's sourceFile, beginLineNumber
and endLineNumber; the line of the construct's call, so begin and end are the same) and its function as the
canonical name. Timestamps are CLOCK_MONOTONIC nanoseconds.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tailscope.trace.errors import TraceInputError
from tailscope.trace.records import region_label, region_source
from tailscope.trace.timeline import DEFAULT_BINS_MIBS, bin_names, edges, messages


def write_otf2(
    path: Path,
    regions: pd.DataFrame,
    traffic: pd.DataFrame,
    sockets: list[int],
    *,
    bins_mibs: tuple[float, ...] = DEFAULT_BINS_MIBS,
) -> Path:
    """Write the archive `path`/traces.otf2 (path must not exist: opening a writer destroys an archive)."""
    import otf2  # heavy: only for this export
    from otf2.enums import GroupType, LocationGroupType, LocationType, Paradigm, RegionRole

    if path.exists():
        raise TraceInputError(f"{path}: already exists; OTF2 would overwrite the archive there")
    msgs = messages(traffic, regions, bins_mibs)
    sockets = sorted(set(sockets) | {m.src for m in msgs} | {m.dst for m in msgs})
    all_edges = list(edges(regions))
    with otf2.writer.open(str(path), timer_resolution=1_000_000_000) as trace:
        defs = trace.definitions
        root = defs.system_tree_node("node")
        groups = {
            s: defs.location_group(
                f"socket {s}", location_group_type=LocationGroupType.PROCESS, system_tree_parent=root
            )
            for s in sockets
        }
        socket_loc = {
            s: defs.location(f"socket {s}", type=LocationType.CPU_THREAD, group=groups[s]) for s in sockets
        }
        region_defs: dict[str, object] = {}
        sources = region_source(regions)

        def region(label: str) -> object:
            if label not in region_defs:
                construct = label.split(" @ ")[0]
                role = (
                    RegionRole.PARALLEL
                    if construct == "parallel"
                    else RegionRole.BARRIER
                    if "barrier" in construct
                    else RegionRole.LOOP
                    if construct == "loop"
                    else RegionRole.CODE
                )
                file, line, function = sources.get(label, (None, None, None))
                region_defs[label] = defs.region(
                    label,
                    canonical_name=function or label,
                    region_role=role,
                    paradigm=Paradigm.OPENMP,
                    source_file=file or "",
                    begin_line_number=line or 0,
                    end_line_number=line or 0,
                )
            return region_defs[label]

        members = [socket_loc[s] for s in sockets]
        defs.group(
            "socket locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=members
        )
        comm_group = defs.group(
            "sockets", group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI, members=members
        )
        comms = [defs.comm(f"bandwidth {name}", group=comm_group) for name in bin_names(bins_mibs)]
        rank = {s: i for i, s in enumerate(sockets)}

        # socket locations: the top-level parallel regions of the initial thread (disjoint in time) on the
        # socket it ran on, and the messages of each region on the sockets they leave and reach
        thread_socket = regions.groupby("thread")["socket"].agg(lambda x: x.mode().iloc[0]).to_dict()
        top = regions[(regions["kind"] == "parallel") & (regions["depth"] == 0) & (regions["thread"] == 0)]
        per_socket: dict[int, list[tuple[int, float, str, object]]] = {s: [] for s in sockets}
        for row in top.to_dict("records"):
            s = int(thread_socket.get(0, row["socket"]))
            if s in per_socket:
                label = region_label(row)
                per_socket[s].append((int(row["mono_begin_ns"]), 0, "enter", label))
                per_socket[s].append((int(row["mono_end_ns"]), 3, "leave", label))
        for i, m in enumerate(msgs):
            per_socket[m.src].append((m.begin_ns, 1, "send", i))
            per_socket[m.dst].append((m.end_ns, 2, "recv", i))
            # per-link bandwidth as a metric on the receiving socket: the region's rate while it runs
            per_socket[m.dst].append((m.begin_ns, 0.5, "rate", i))
            per_socket[m.dst].append((m.end_ns, 2.5, "rate0", i))
        metrics = {
            (m.src, m.dst): defs.metric(f"bytes/s socket {m.src} -> {m.dst} ({m.source})", unit="B/s")
            for m in msgs
        }
        for s, items in per_socket.items():
            writer = trace.event_writer_from_location(socket_loc[s])
            for t, _, what, obj in sorted(items, key=lambda x: (x[0], x[1])):
                if what == "enter":
                    writer.enter(t, region(str(obj)))
                elif what == "leave":
                    writer.leave(t, region(str(obj)))
                elif what == "send":
                    m = msgs[int(obj)]  # type: ignore[call-overload]
                    writer.mpi_send(t, rank[m.dst], comms[m.bin], int(obj), m.nbytes)  # type: ignore[call-overload]
                elif what == "recv":
                    m = msgs[int(obj)]  # type: ignore[call-overload]
                    writer.mpi_recv(t, rank[m.src], comms[m.bin], int(obj), m.nbytes)  # type: ignore[call-overload]
                else:
                    m = msgs[int(obj)]  # type: ignore[call-overload]
                    rate = m.nbytes / max((m.end_ns - m.begin_ns) / 1e9, 1e-9) if what == "rate" else 0.0
                    writer.metric(t, metrics[(m.src, m.dst)], rate)

        # thread locations; a process the program forked names its threads with its pid
        process = regions.groupby("thread")["process"].first().to_dict() if "process" in regions else {}
        main_pid = process.get(min(process), None) if process else None
        writers = {}
        for e in all_edges:
            if e.thread not in writers:
                s = int(thread_socket.get(e.thread, sockets[0]))
                pid = process.get(e.thread)
                forked = pid is not None and pd.notna(pid) and pid != main_pid
                loc = defs.location(
                    f"thread {e.thread}" + (f" (pid {int(pid)})" if forked else ""),
                    type=LocationType.CPU_THREAD,
                    group=groups.get(s, groups[sockets[0]]),
                )
                writers[e.thread] = trace.event_writer_from_location(loc)
            if e.enter:
                writers[e.thread].enter(e.ns, region(e.label))
            else:
                writers[e.thread].leave(e.ns, region(e.label))
    return path / "traces.otf2"
