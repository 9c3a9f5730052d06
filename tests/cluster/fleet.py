"""Synthetic fleets for the cluster tests: node medians, run noise, slow runs, written through the store."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tailscope.campaign import slurm
from tailscope.campaign.spec import load_spec
from tailscope.store.campaign import Campaign
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

VARIANT = "l2sum-fleet000"


def fleet_frame(node_factor: np.ndarray, runs: int, noise: float, rng: np.random.Generator) -> pd.DataFrame:
    """Scored-style runs: value = 100 x node factor x lognormal run noise (higher is better)."""
    nodes = np.repeat(np.arange(node_factor.size), runs)
    value = 100.0 * node_factor[nodes] * np.exp(rng.normal(0.0, noise, nodes.size))
    return pd.DataFrame(
        {
            "run_id": [uuid.uuid4().hex for _ in range(nodes.size)],
            "node": [f"c{i:04d}" for i in nodes],
            "probe": "l2sum",
            "variant": VARIANT,
            "params": "{}",
            "trial": np.tile(np.arange(runs), node_factor.size),
            "started_at": pd.Timestamp("2026-11-01", tz="UTC"),
            "metric": "bandwidth",
            "value": value,
            "unit": "GB/s",
            "higher_is_better": True,
            "status": "ok",
        }
    )


def write_frame(campaign: Campaign, frame: pd.DataFrame, task: str = "task") -> None:
    """One chunk per node, as each node's runner would write it."""
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    for node, g in frame.groupby("node", sort=False):
        rows = {
            "run_id": g["run_id"].tolist(),
            "campaign": [campaign.campaign_id] * len(g),
            "node": g["node"].tolist(),
            "probe": g["probe"].tolist(),
            "variant": g["variant"].tolist(),
            "params": g["params"].tolist(),
            "trial": g["trial"].astype("int32").tolist(),
            "started_at": [base + dt.timedelta(seconds=int(t)) for t in g["trial"]],
            "metric": g["metric"].tolist(),
            "value": g["value"].astype(float).tolist(),
            "unit": g["unit"].tolist(),
            "higher_is_better": g["higher_is_better"].tolist(),
            "status": g["status"].tolist(),
            "source": ["probe"] * len(g),
            "task": [f"{task}-{node}"] * len(g),
        }
        table = pa.Table.from_pydict(rows, schema=None)
        with load_into(campaign.root, "test") as load:
            load.write_tables({"runs": _conformable(table)}, node=str(node))


def spec_fleet(
    spec: Path, node_factor: np.ndarray, runs: int, noise: float, rng: np.random.Generator
) -> Campaign:
    """The Slurm campaign `spec` prepares, holding a fleet_frame of its first probe as its nodes would."""
    prepared = slurm.prepare(load_spec(spec))
    frame = fleet_frame(node_factor, runs, noise, rng)
    frame["variant"] = prepared.manifest.plans[0].variant
    write_frame(prepared, frame)
    return Campaign.open(prepared.root)


def _conformable(table: pa.Table) -> pa.Table:
    spec = TABLES["runs"]
    return table.cast(pa.schema([spec.schema.field(n) for n in table.column_names]))
