"""Open time and size of a fleet report (1,000 nodes x 50 trials) in headless Chromium, against a one-node
report opened in the same browser (the peer: this machine is shared, so the ratio is what to read).

    .venv/bin/python bench/bench_fleet_report.py [--nodes 1000] [--trials 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

from tailscope.analysis.model import Settings
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES
from tailscope.verbs.workflow import analyze_campaign, write_report


def campaign(root: Path, nodes: int, trials: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    factor = np.exp(rng.normal(0.0, 0.01, nodes))
    node = np.repeat(np.arange(nodes), trials)
    value = 100.0 * factor[node] * np.exp(rng.normal(0.0, 0.01, node.size))
    value[rng.random(node.size) < 0.004] *= 0.8
    trial = np.tile(np.arange(trials), nodes)
    base = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    rows = {
        "run_id": [uuid.uuid4().hex for _ in range(node.size)],
        "campaign": ["bench"] * node.size,
        "node": [f"c{i:04d}" for i in node],
        "probe": ["l2sum"] * node.size,
        "variant": ["l2sum-bench"] * node.size,
        "params": ["{}"] * node.size,
        "trial": trial.astype("int32").tolist(),
        "started_at": [
            base + dt.timedelta(seconds=int(30 * t + n % 30)) for t, n in zip(trial, node, strict=True)
        ],
        "metric": ["bandwidth"] * node.size,
        "value": value.tolist(),
        "unit": ["GB/s"] * node.size,
        "higher_is_better": [True] * node.size,
        "status": ["ok"] * node.size,
        "source": ["probe"] * node.size,
        "task": ["bench"] * node.size,
    }
    spec = TABLES["runs"].schema
    table = pa.Table.from_pydict(rows).cast(pa.schema([spec.field(n) for n in rows]))
    with load_into(root, "bench", create=True, name=root.name) as load:
        load.write_tables({"runs": table}, node="all")
    return root


def report(root: Path) -> Path:
    t0 = time.monotonic()
    path = write_report(root, analyze_campaign(root, Settings()), root / "report.html")
    size = path.stat().st_size / 1e6
    print(f"{root.name}: analysed and written in {time.monotonic() - t0:.1f} s, {size:.1f} MB")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory() as tmp:
        fleet = report(campaign(Path(tmp) / "fleet", args.nodes, args.trials))
        peer = report(campaign(Path(tmp) / "one-node", 1, args.trials))
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,1000"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            times: dict[str, list[float]] = {"fleet": [], "one-node": []}
            for _ in range(args.repeat):
                for name, path in (("one-node", peer), ("fleet", fleet)):
                    driver.get("about:blank")
                    t0 = time.monotonic()
                    driver.get(path.as_uri())  # returns after the load event
                    times[name].append(time.monotonic() - t0)
        finally:
            driver.quit()
    f, p = statistics.median(times["fleet"]), statistics.median(times["one-node"])
    print(f"open (median of {args.repeat}): fleet {f:.2f} s, one-node {p:.2f} s, ratio {f / p:.1f}x")


if __name__ == "__main__":
    main()
