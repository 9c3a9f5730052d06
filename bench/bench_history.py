"""bench_history: `tailscope history` on a synthetic fleet with changes injected at known entries.

For each fleet size (nodes x days x 4 probes; default 100, 1,000 and 5,000 nodes x 365 daily entries):
1. write: one `history add` per day (the fleet's nightly campaign collected: a CampaignSummary through the
   store's real append path, automatic compaction included), then `history compact`;
2. accuracy (the issue's targets): recall of injected changes >= 3 noise sds with >= 3 entries after them
   (found when `at` is within one entry), false changes per 100 node-probe-years, the injected fact named;
3. `history show HISTORY --json` in its own process against a peer in the same run: a plain pandas loop
   over the same Parquet files (read, keep the latest version of each entry, group by node and variant,
   the same change-point method per series), wall time and peak RSS of each; the ratios printed;
4. linear growth: seconds and MiB per million entries for every size.

    python bench/bench_history.py                         # 100, 1000, 5000 nodes x 365 days
    python bench/bench_history.py --nodes 100 1000 --days 365
Prints a table; exit status 1 when a target is missed (recall < 0.95, > 1 false change per 100
node-probe-years, a fact not named, show > 2x the peer's time or memory).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "history"))

from synthetic import day_rows, make_fleet, score  # noqa: E402

from tailscope.analysis.model import Settings  # noqa: E402
from tailscope.history.directory import DirectoryHistory  # noqa: E402
from tailscope.history.show import answer  # noqa: E402
from tailscope.history.summary import CampaignSummary  # noqa: E402

PEER = r"""
import sys, json
import numpy as np, pandas as pd
from tailscope.history.changepoint import candidates, fit_prior, judge_oriented, oriented
root = sys.argv[1]
files = []
import os
for name in sorted(os.listdir(f"{root}/commits")):
    rec = json.load(open(f"{root}/commits/{name}"))
    files += [f"{root}/shards/history_entries/{n}" for n in rec["shards"].get("history_entries", [])]
frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
frame = frame.sort_values("added_at").drop_duplicates(["campaign", "node", "variant"], keep="last")
frame = frame.sort_values(["node", "variant", "started_at"])
series = []
for (node, variant), block in frame.groupby(["node", "variant"], sort=False):
    y = oriented(block["median"].to_numpy(float), bool(block["higher_is_better"].iloc[0]))
    series.append((node, variant, block["started_at"].to_numpy(), candidates(y)))
variants = {s[1] for s in series}
priors = {v: fit_prior((c.noise, c.df) for _n, vv, _t, c in series if vv == v) for v in variants}
changes = []
for node, variant, times, c in series:
    for step in judge_oriented(c, priors[variant]).steps:
        changes.append({"node": node, "variant": variant, "at": str(times[step.index])})
json.dump({"changes": changes}, sys.stdout)
"""


def measure(cmd: list[str]) -> tuple[float, float, bytes]:
    """Wall time and peak RSS of `cmd` in a fresh Python that reports its own peak: VmHWM of its own memory
    map (ru_maxrss is not: Linux carries the forking parent's peak across exec, and this bench holds the
    history it wrote, so every child read the same 970 MiB)."""
    wrapper = (
        "import runpy, sys, time; sys.argv = sys.argv[1:]; t = time.perf_counter()\n"
        "try:\n    runpy.run_module(sys.argv[0], run_name='__main__') if not sys.argv[0].endswith('.py') "
        "else runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "sys.stdout.flush()\n"
        "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]\n"
        "sys.stderr.write(f'\\nBENCH {time.perf_counter() - t} {hwm}\\n')\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, check=False)
    line = [x for x in proc.stderr.decode().splitlines() if x.startswith("BENCH ")]
    if not line:
        raise SystemExit(f"{cmd} failed: {proc.stderr.decode()[-2000:]}")
    _, wall, rss = line[-1].split()
    return float(wall), int(rss) / 1024.0, proc.stdout


def run_size(nodes: int, days: int, workdir: Path) -> dict[str, float]:
    fleet, y, facts = make_fleet(nodes, days, probes=4, seed=2026)
    root = workdir / f"history-{nodes}"
    shutil.rmtree(root, ignore_errors=True)
    store = DirectoryHistory(root)
    start = time.perf_counter()
    for day in range(days):
        entries, sets = day_rows(fleet, y, facts, day)
        store.add(CampaignSummary(entries[0].campaign, entries[0].campaign_name, tuple(entries), tuple(sets)))
    write_s = time.perf_counter() - start
    commits_before = len(os.listdir(root / "commits"))
    start = time.perf_counter()
    store.compact()
    compact_s = time.perf_counter() - start
    files = sum(len(os.listdir(root / "shards" / t)) for t in os.listdir(root / "shards"))
    result = answer(store.read(), Settings())
    s = score(fleet, list(result.changes))
    script = workdir / "peer.py"
    script.write_text(PEER)
    peer_s, peer_mb, peer_out = measure([str(script), str(root)])
    show_s, show_mb, show_out = measure(["tailscope", "history", "show", str(root), "--json"])
    shown = json.loads(show_out)
    peer_changes = json.loads(peer_out)["changes"]
    entries = nodes * days * 4
    return {
        "nodes": nodes, "days": days, "entries": entries, "write_s": write_s, "commits": commits_before,
        "compact_s": compact_s, "files": files, **s, "show_s": show_s, "show_mb": show_mb,
        "peer_s": peer_s, "peer_mb": peer_mb, "show_changes": len(shown["changes"]),
        "peer_changes": len(peer_changes), "events": len(shown["fleet_events"]),
        "event_facts": ",".join(sorted({str(e["shared"].get("fact")) for e in shown["fleet_events"]})),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--keep", type=Path, help="write the histories here (default: a temporary directory)")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-history-"))
    workdir.mkdir(parents=True, exist_ok=True)
    failed = False
    rows = []
    try:
        for n in args.nodes:
            r = run_size(n, args.days, workdir)
            rows.append(r)
            print(
                f"{n} nodes x {args.days} days x 4 probes = {r['entries']:,} entries: "
                f"{args.days} appends in {r['write_s']:.1f} s ({r['commits']} commit records left by "
                f"automatic compaction), compact {r['compact_s']:.1f} s -> {r['files']} shard files"
            )
            print(
                f"  accuracy: recall {r['recall']:.3f} of {r['eligible']} injected changes >= 3 sds; "
                f"{r['false_changes']} false changes = {r['false_per_100_years']:.2f} per 100 "
                "node-probe-years; "
                f"fact named for {round(r['facts_named'] * r['fact_changes'])} of {r['fact_changes']} "
                "fact changes; "
                f"{r['events']} fleet events named by: {r['event_facts']}"
            )
            print(
                f"  history show --json: {r['show_s']:.2f} s, {r['show_mb']:.0f} MiB peak; pandas loop peer: "
                f"{r['peer_s']:.2f} s, {r['peer_mb']:.0f} MiB "
                f"(ratio time {r['show_s'] / r['peer_s']:.2f}x, "
                f"memory {r['show_mb'] / r['peer_mb']:.2f}x; "
                f"changes {r['show_changes']} vs {r['peer_changes']})"
            )
            sys.stdout.flush()
            failed |= r["recall"] < 0.95 or r["false_per_100_years"] > 1.0 or r["facts_named"] < 1.0
            failed |= r["show_s"] > 2 * r["peer_s"] or r["show_mb"] > 2 * r["peer_mb"]
        print("growth (per million entries):")
        for r in rows:
            m = r["entries"] / 1e6
            print(
                f"  {r['nodes']:>6} nodes: show {r['show_s'] / m:.2f} s/M, {r['show_mb'] / m:.0f} MiB/M; "
                f"peer {r['peer_s'] / m:.2f} s/M; write {r['write_s'] / m:.2f} s/M"
            )
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("FAILED: a target was missed" if failed else "all targets met")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
