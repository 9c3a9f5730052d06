"""Builders of the addr tests: synthetic campaigns (store shards) and random physical pages."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from tailscope.store.campaign import Campaign, utcnow
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES


def run_row(campaign: Campaign, node: str, trial: int, value: float, *, config: str | None = None) -> dict:
    return {
        "run_id": uuid.uuid4().hex,
        "campaign": campaign.campaign_id,
        "node": node,
        "probe": "l2sum",
        "variant": "l2sum-test",
        "params": "{}",
        "trial": trial,
        "page_policy": "2m",
        "started_at": utcnow() + dt.timedelta(seconds=trial),
        "metric": "bandwidth",
        "value": value,
        "unit": "GB/s",
        "higher_is_better": True,
        "status": "ok",
        "source": "probe",
        "task": "t",
        "config": config,
    }


def write_campaign(
    root: Path,
    trials: list[tuple[str, float, np.ndarray, np.ndarray | None]],
    *,
    page_size: int = 2 << 20,
    config: str | None = None,
    virtualization: str | None = None,
) -> Campaign:
    """A campaign whose trials are (node, value, page physical addresses, page threads or None)."""
    campaign = Campaign.create(root)
    runs, pages = [], []
    per_node: dict[str, int] = {}
    for node, value, addresses, threads in trials:
        trial = per_node.get(node, 0)
        per_node[node] = trial + 1
        row = run_row(campaign, node, trial, value, config=config)
        runs.append(row)
        for i, pa_ in enumerate(addresses.tolist()):
            pages.append(
                {
                    "run_id": row["run_id"],
                    "array": "data",
                    "thread": None if threads is None else int(threads[i]),
                    "virtual_address": 0x7F0000000000 + i * page_size,
                    "physical_address": int(pa_),
                    "page_size": page_size,
                }
            )
    tables = {
        "runs": pa.Table.from_pylist(runs, schema=TABLES["runs"].schema),
        "pages": pa.Table.from_pylist(pages, schema=TABLES["pages"].schema),
    }
    if virtualization is not None:
        nodes = [
            {
                "node": n,
                "collected_at": utcnow(),
                "task": "t",
                "virtualization": virtualization,
                "facts": "{}",
            }
            for n in sorted(per_node)
        ]
        tables["nodes"] = pa.Table.from_pylist(nodes, schema=TABLES["nodes"].schema)
    with load_into(campaign.root, "test") as load:
        load.write_tables(tables, node="all")
    return campaign


def random_pages(rng: np.random.Generator, count: int, limit: int, page_size: int = 2 << 20) -> np.ndarray:
    """`count` distinct page-aligned physical addresses below `limit`."""
    frames = rng.choice(limit // page_size, size=count, replace=False)
    return frames.astype(np.uint64) * np.uint64(page_size)


def every_line(pages: np.ndarray, page_size: int = 2 << 20) -> np.ndarray:
    return (pages[:, None] + (np.arange(page_size // 64, dtype=np.uint64) * np.uint64(64))[None, :]).reshape(
        -1
    )
