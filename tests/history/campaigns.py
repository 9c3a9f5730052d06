"""Small real campaigns (written through the store's load path) for the history tests."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from tailscope.probes.catalogue import ProbeVariant
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

FACTS = {
    "kernel": "6.1.0-18-amd64",
    "microcode": "0x2b000590",
    "thp_enabled": "madvise",
    "governor": "performance",
}


def write_campaign(
    root: Path,
    at: dt.datetime,
    nodes: dict[str, float],
    *,
    trials: int = 12,
    facts: dict[str, dict] | None = None,
    seed: int = 0,
    first_trial: int = 0,
) -> Path:
    """A campaign of `trials` stream runs per node around the node's level (+-0.3%), and each node's facts;
    called again on the same root it adds trials (a campaign that grew)."""
    variant = ProbeVariant("stream", {})
    rng = np.random.default_rng(seed)
    with load_into(root, "test", create=True, name=root.name) as load:
        for node, level in nodes.items():
            rows = []
            for t in range(trials):
                rows.append(
                    {
                        "run_id": uuid.uuid4().hex,
                        "campaign": load.campaign_id,
                        "node": node,
                        "probe": "stream",
                        "variant": variant.variant_id,
                        "params": variant.params_json,
                        "trial": first_trial + t,
                        "started_at": at + dt.timedelta(seconds=2 * (first_trial + t)),
                        "wall_s": 0.5,
                        "metric": "bandwidth",
                        "value": level * (1 + rng.uniform(-0.003, 0.003)),
                        "unit": "GB/s",
                        "higher_is_better": True,
                        "status": "ok",
                        "source": "probe",
                        "task": "t1",
                    }
                )
            load.write("runs", pa.Table.from_pylist(rows, schema=TABLES["runs"].schema), node=node)
            node_facts = {**FACTS, **((facts or {}).get(node, {})), "node": node}
            load.write(
                "nodes",
                pa.Table.from_pylist(
                    [
                        {
                            "node": node,
                            "collected_at": at,
                            "task": "t1",
                            "facts": json.dumps(node_facts),
                            "thp_enabled": node_facts.get("thp_enabled"),
                        }
                    ],
                    schema=TABLES["nodes"].schema,
                ),
                node=node,
            )
        load.add_plan(variant.to_plan(first_trial + trials))
    return root


def _add_after(location: str, summary: object, delay: float) -> None:
    import os
    import sys
    import time

    from tailscope.history.store import open_history

    time.sleep(delay)
    try:
        open_history(location).add(summary)  # type: ignore[arg-type]
    except BaseException as exc:
        print(f"writer failed: {exc}", file=sys.stderr)
        os._exit(2)
    os._exit(0)


def concurrent_adds(location: str, summaries: list, stagger: float) -> list[int | None]:
    """Each summary added by its own process (forked), the i-th starting `stagger` x i seconds after the
    first; their exit codes (0: added)."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_add_after, args=(location, s, stagger * i)) for i, s in enumerate(summaries)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    return [proc.exitcode for proc in procs]
