"""What `tailscope trace` prints: per region (file:line) time, bytes between sockets and remote fraction; the
communication matrix (socket x socket bytes) for the run; the placement; the finding."""

from __future__ import annotations

import pandas as pd

from tailscope.trace.records import region_labels


def region_table(regions: pd.DataFrame, traffic: pd.DataFrame) -> pd.DataFrame:
    """Per parallel region code location: instances, total seconds, bytes, remote bytes, remote fraction."""
    par = regions[regions["kind"] == "parallel"].copy()
    if par.empty:
        return pd.DataFrame(
            columns=["region", "instances", "seconds", "bytes", "remote_bytes", "remote_fraction"]
        )
    par["region"] = region_labels(par)
    t = traffic.copy()
    remote = (t["src_socket"] != t["dst_socket"]) & (t["src_socket"] >= 0)
    t["remote_bytes"] = t["bytes"].where(remote, 0.0)
    per = (
        t.groupby("parallel")[["bytes", "remote_bytes"]].sum()
        if not t.empty
        else pd.DataFrame(columns=["bytes", "remote_bytes"])
    )
    par = par.join(per, on="parallel").fillna({"bytes": 0.0, "remote_bytes": 0.0})
    out = par.groupby("region").agg(
        instances=("parallel", "count"),
        seconds=("seconds", "sum"),
        bytes=("bytes", "sum"),
        remote_bytes=("remote_bytes", "sum"),
    )
    out["remote_fraction"] = (out["remote_bytes"] / out["bytes"]).where(out["bytes"] > 0, 0.0)
    return out.sort_values("seconds", ascending=False).reset_index()


def matrix(
    traffic: pd.DataFrame, parallel: int | list[int] | None = None, source: str | None = None
) -> pd.DataFrame:
    """Bytes from socket (rows) to socket (columns): the whole run, one region instance or several."""
    if parallel is None:
        t = traffic
    else:
        t = traffic[traffic["parallel"].isin([parallel] if isinstance(parallel, int) else parallel)]
    if source:
        t = t[t["source"] == source]
    return t.pivot_table(
        index="src_socket", columns="dst_socket", values="bytes", aggfunc="sum", fill_value=0.0
    )


def _mib(v: float) -> str:
    return f"{v / 2**20:,.1f} MiB"


def render(regions: pd.DataFrame, traffic: pd.DataFrame, placement: pd.DataFrame, finding_text: str) -> str:
    lines = ["regions (parallel, by time):"]
    for r in region_table(regions, traffic).head(20).itertuples(index=False):
        lines.append(
            f"  {r.region:<48} {r.instances:>6}x {r.seconds * 1e3:>10.3f} ms  {_mib(r.bytes):>14}"
            f"  remote {r.remote_fraction:6.1%}"
        )
    table = region_table(regions, traffic)
    par = regions[regions["kind"] == "parallel"]
    labels = pd.Series(region_labels(par), index=par["parallel"].to_numpy())
    for source in sorted(traffic["source"].unique()) if not traffic.empty else []:
        scopes = [("whole run", None)]
        if not table.empty:
            top = str(table["region"].iloc[0])
            scopes.append((top, [int(p) for p in labels[labels == top].index]))
        for scope, parallels in scopes:
            m = matrix(traffic, parallels, source=source)
            lines.append(f"communication matrix, {scope} ({source}; rows: from socket, columns: to socket):")
            lines.append("          " + "".join(f"{f'socket {c}':>16}" for c in m.columns))
            for src, row in m.iterrows():
                lines.append(f"  socket {src:<2}" + "".join(f"{_mib(v):>16}" for v in row))
    if not placement.empty:
        # the copy holding the most data (the last one may come after the program freed its arrays)
        per_snapshot = placement.groupby("snapshot")["bytes"].sum()
        last = placement[placement["snapshot"] == per_snapshot.idxmax()]
        total = float(last["bytes"].sum()) or 1.0
        spread = ", ".join(
            f"node {int(r.numa_node)} (socket {int(r.socket)}): {r.bytes / total:.0%}"
            for r in last.itertuples(index=False)
        )
        lines.append(
            f"placement (largest numa_maps copy): {_mib(float(last['bytes'].sum()))} of data; {spread}"
        )
    lines.append(f"finding: {finding_text}")
    return "\n".join(lines)
