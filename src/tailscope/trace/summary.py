"""What `tailscope trace` prints: per region (code address and file:line) time, bytes touched and remote
fraction; the communication matrix (socket x socket bytes) for the run; the placement; the finding."""

from __future__ import annotations

import pandas as pd

from tailscope.trace.placement import touched_per_instance
from tailscope.trace.records import region_labels


def region_table(regions: pd.DataFrame, traffic: pd.DataFrame) -> pd.DataFrame:
    """Per parallel region (code address, and file:line): instances, total seconds, bytes, remote bytes,
    remote fraction, and the bytes one instance touched: `touched` where the tool measured it (the median over
    the instances, each its own measure or its region's last; `measured` True), else the program's data
    footprint (`measured` False)."""
    cols = ["region", "instances", "seconds", "bytes", "remote_bytes", "remote_fraction"]
    cols += ["touched", "measured", "measured_instances"]
    par = regions[regions["kind"] == "parallel"].copy()
    if par.empty:
        return pd.DataFrame(columns=cols)
    par["region"] = region_labels(par)
    t = traffic.copy()
    remote = (t["src_socket"] != t["dst_socket"]) & (t["src_socket"] >= 0)
    t["remote_bytes"] = t["bytes"].where(remote, 0.0)
    # the placement model spreads a region's bytes over the sockets; uncore rows would count them again
    model = t[t["source"] == "placement-model"] if "source" in t.columns else t
    per = (
        t.groupby("parallel")[["bytes", "remote_bytes"]].sum()
        if not t.empty
        else pd.DataFrame(columns=["bytes", "remote_bytes"])
    )
    footprint = model.groupby("parallel")["bytes"].sum() if not model.empty else pd.Series(dtype=float)
    par = par.join(per, on="parallel").fillna({"bytes": 0.0, "remote_bytes": 0.0})
    par["footprint"] = par["parallel"].map(footprint).astype(float)
    touched = touched_per_instance(par.drop_duplicates("parallel"))
    own = par["touched_bytes"] if "touched_bytes" in par.columns else pd.Series(pd.NA, index=par.index)
    par["own_measure"] = pd.to_numeric(own, errors="coerce").notna().astype(int)
    par["touched_bytes"] = par["parallel"].map(touched).astype(float)
    out = par.groupby("region").agg(
        instances=("parallel", "count"),
        seconds=("seconds", "sum"),
        bytes=("bytes", "sum"),
        remote_bytes=("remote_bytes", "sum"),
        touched=("touched_bytes", "median"),
        measured_instances=("own_measure", "sum"),
        footprint=("footprint", "median"),
    )
    out["measured"] = out["touched"].notna()
    out["touched"] = out["touched"].where(out["measured"], out["footprint"]).fillna(0.0)
    out["remote_fraction"] = (out["remote_bytes"] / out["bytes"]).where(out["bytes"] > 0, 0.0)
    return out.sort_values("seconds", ascending=False).reset_index()[cols]


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
    table = region_table(regions, traffic)
    lines = [
        "regions (parallel, by time; bytes per instance: `touched` as measured in the region, "
        "`footprint` the whole program's data where it was not measured):"
    ]
    slowed = int(table["measured_instances"].sum()) if not table.empty else 0
    if slowed:
        lines.append(
            f"  ({slowed} instance(s) ran with the bytes measured, slower than the others: their pages' "
            "accessed bits were cleared first; --touched off leaves every instance alone)"
        )
    for r in table.head(20).itertuples(index=False):
        what = "touched" if r.measured else "footprint"
        lines.append(
            f"  {r.region:<56} {r.instances:>6}x {r.seconds * 1e3:>10.3f} ms  {what:>9} {_mib(r.touched):>12}"
            f"  remote {r.remote_fraction:6.1%}"
        )
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
