#!/usr/bin/env python3
"""`campaign collect` + `analyze` of a generated 1,000-node x 50-trial campaign: time and peak memory.

    PYTHONPATH=src .venv/bin/python bench/bench_cluster_analyze.py [--nodes 1000] [--trials 50]

The campaign is written the way nodes write it (store/campaign.py: one chunk per node, `iterations` then
`runs` shards, atomic renames): a fleet with 3% node-to-node spread, 1% run noise, 0.5% slow runs and a few
slow nodes. Then, each in a fresh child process (so its peak RSS is its own, read with
resource.getrusage(RUSAGE_CHILDREN).ru_maxrss after it exits):
  - tailscope: slurm.collect (validate every shard footer, per-node progress) + workflow.analyze_campaign
    (runs and iterations through DuckDB, per-node statistics, slow-run classification, cluster analysis);
  - peer: pyarrow reads the same runs shards and pandas does groupby(variant, node).value.median() — the
    least a node-median screen has to do.
Targets: collect + analyze < 10 s and < 2 GiB peak. Printed: both times, the ratio, both peak RSS values.

Figures seen on the 2-vCPU KVM development VM: see the report of the issue that added this bench.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import resource
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

TARGET_S, TARGET_BYTES = 10.0, 2 * 2**30


def generate(root: Path, nodes: int, trials: int, iterations: int, seed: int) -> None:
    from tailscope.store.campaign import Campaign
    from tailscope.store.load import load_into
    from tailscope.store.manifest import Plan
    from tailscope.store.schema import TABLES

    rng = np.random.default_rng(seed)
    campaign = Campaign.create(root, name="bench-fleet")
    variant = "l2sum-bench000"
    campaign.add_plan(Plan(variant, "l2sum", {}, trials))
    factor = np.exp(rng.normal(0.0, 0.03, nodes))
    factor[rng.choice(nodes, max(1, nodes // 200), replace=False)] *= 0.85
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    for i in range(nodes):
        node = f"c{i:04d}"
        value = 100.0 * factor[i] * np.exp(rng.normal(0.0, 0.01, trials))
        slow = rng.random(trials) < 0.005
        value[slow] *= 0.8
        run_ids = [uuid.uuid4().hex for _ in range(trials)]
        runs = pa.table(
            {
                "run_id": run_ids,
                "campaign": [campaign.campaign_id] * trials,
                "node": [node] * trials,
                "probe": ["l2sum"] * trials,
                "variant": [variant] * trials,
                "params": ["{}"] * trials,
                "trial": pa.array(np.arange(trials), pa.int32()),
                "started_at": [base + dt.timedelta(seconds=t) for t in range(trials)],
                "metric": ["bandwidth"] * trials,
                "value": value,
                "unit": ["GB/s"] * trials,
                "higher_is_better": [True] * trials,
                "status": ["ok"] * trials,
                "source": ["probe"] * trials,
                "task": [f"bench-{node}"] * trials,
            }
        )
        per_iteration = value[:, None] * np.exp(rng.normal(0.0, 0.002, (trials, iterations)))
        its = pa.table(
            {
                "run_id": np.repeat(run_ids, iterations),
                "iteration": pa.array(np.tile(np.arange(iterations), trials), pa.int32()),
                "warmup": np.tile(np.arange(iterations) == 0, trials),
                "seconds": np.full(trials * iterations, 0.01),
                "value": per_iteration.ravel(),
            }
        )
        tables = {
            "runs": _conform(runs, TABLES["runs"].schema),
            "iterations": _conform(its, TABLES["iterations"].schema),
        }
        with load_into(campaign.root, "test") as load:
            load.write_tables(tables, node=node)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    return table.cast(pa.schema([schema.field(n) for n in table.column_names]))


def tailscope_job(root: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    from tailscope.analysis.model import Settings
    from tailscope.campaign import slurm
    from tailscope.store.campaign import Campaign
    from tailscope.verbs.workflow import analyze_campaign

    t0 = time.perf_counter()
    collected = slurm.collect(Campaign.open(Path(root)))
    t1 = time.perf_counter()
    analysis = analyze_campaign(Path(root), Settings())
    t2 = time.perf_counter()
    (cluster,) = analysis.cluster
    # Where the analyze time goes (measured again, after the timed run: warm caches make these a lower bound).
    from tailscope.analysis.cluster import analyze_cluster, cluster_settings_of
    from tailscope.analysis.summary import analyze, score_runs
    from tailscope.verbs.workflow import load_frames

    campaign = Campaign.open(Path(root))
    t3 = time.perf_counter()
    runs, iterations = load_frames(campaign)
    t4 = time.perf_counter()
    analyze(runs, iterations, Settings(), campaign.campaign_id, cluster_settings_of(campaign.manifest))
    t5 = time.perf_counter()
    ok = runs[runs["status"] == "ok"].reset_index(drop=True)
    scored = score_runs(ok, Settings())
    t6 = time.perf_counter()
    analyze_cluster(scored, Settings())
    t7 = time.perf_counter()
    out.put(
        {
            "load_s": t4 - t3,
            "summary_s": t5 - t4,
            "cluster_s": t7 - t6,
            "collect_s": t1 - t0,
            "analyze_s": t2 - t1,
            "shards": collected.shards,
            "bad": len(collected.bad),
            "runs": cluster.runs,
            "drain": len(cluster.drain),
            "retest": len(cluster.retest),
            "bins": len(cluster.bins),
        }
    )


def peer_job(root: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    files = sorted((Path(root) / "shards" / "runs").glob("*.parquet"))
    frame = pa.concat_tables(
        [pq.read_table(f, columns=["variant", "node", "value"]) for f in files]
    ).to_pandas()
    medians = frame.groupby(["variant", "node"])["value"].median()
    out.put({"peer_s": time.perf_counter() - t0, "groups": len(medians)})


def in_child(target, root: Path) -> tuple[dict, int]:  # type: ignore[no-untyped-def]
    """Run `target` in a fresh process; its result and its peak RSS in bytes."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = ctx.Process(target=target, args=(str(root), queue))
    proc.start()
    result = queue.get(timeout=600)
    proc.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if after <= before:
        print("note: peak RSS not above an earlier child's; the figure below is an upper bound")
    return result, after * 1024  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--iterations", type=int, default=10, help="timed iterations stored per run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="keep the campaign here (default: a temporary directory)")
    args = parser.parse_args()
    print(f"seed {args.seed}: {args.nodes} nodes x {args.trials} trials x {args.iterations} iterations")
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp) / "fleet"
        t0 = time.perf_counter()
        generate(root, args.nodes, args.trials, args.iterations, args.seed)
        print(f"generated through store/campaign.py in {time.perf_counter() - t0:.1f} s: {root}")
        # The peer first: its peak RSS is then not masked by the larger one (RUSAGE_CHILDREN keeps the max).
        peer, peer_rss = in_child(peer_job, root)
        ours, our_rss = in_child(tailscope_job, root)
    total = ours["collect_s"] + ours["analyze_s"]
    print(
        f"tailscope collect {ours['collect_s']:.2f} s ({ours['shards']} shards, {ours['bad']} damaged) + "
        f"analyze {ours['analyze_s']:.2f} s = {total:.2f} s; peak RSS {our_rss / 2**20:.0f} MiB"
    )
    print(
        f"  cluster: {ours['runs']} runs, {ours['drain']} drain, {ours['retest']} re-test, "
        f"{ours['bins']} bins"
    )
    print(
        f"  breakdown (re-measured): store views + load_frames {ours['load_s']:.2f} s, summary.analyze "
        f"{ours['summary_s']:.2f} s of which cluster analysis {ours['cluster_s']:.2f} s; the rest of analyze "
        "is opening the campaign (manifest, shard footers) and the counter-attribution check"
    )
    print(f"peer pyarrow + pandas groupby-median: {peer['peer_s']:.2f} s ({peer['groups']} groups); "
          f"peak RSS {peer_rss / 2**20:.0f} MiB")  # fmt: skip
    print(f"ratio tailscope / peer: {total / peer['peer_s']:.1f}x time, {our_rss / peer_rss:.1f}x memory")
    ok_time, ok_mem = total < TARGET_S, our_rss < TARGET_BYTES
    print(
        f"target < {TARGET_S:g} s: {'met' if ok_time else 'MISSED'}; "
        f"target < {TARGET_BYTES / 2**30:g} GiB: {'met' if ok_mem else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
