#!/usr/bin/env python3
"""`tailscope analyze --json`, `tailscope report` and `tailscope --help` as commands, beside their peers.

    PYTHONPATH=src:bench .venv/bin/python bench/bench_analyze.py [--nodes 1000 10] [--repeats 3]
        [--phases] [--curve] [--keep DIR] [--source OTHER/src]

For each fleet size a campaign of N nodes x 50 trials x 10 iterations is written through the store's own
writers (store/campaign.py, the generator of bench_cluster_analyze.py: one chunk per node, atomic renames).
Then, alternated and repeated (medians printed), each a fresh process whose wall time and peak RSS
(GNU time's %M, of that child alone) are its own:
  - peer: python + pyarrow reads the runs shards, pandas groupby(variant, node).value.median(), the medians
    written to stdout as JSON: the least a node-median screen has to do, the plain way (issue 11);
  - `tailscope analyze DIR --json > file`, once as is and once with PYTHONUNBUFFERED=1 (as in many job
    environments);
  - `tailscope report DIR -o file.html`.
And `tailscope --help` against bare `python -c pass` and `python -c "import argparse"`.
Targets (issue 31): analyze --json of 1,000 nodes <= 1.3x the peer's time and <= 1.5x its memory, buffered
or not; analyze of 10 nodes <= 1x the peer's time (the fixed cost); report <= 1.5x the peer's time; --help
<= 1.5x `python -c "import argparse"`. `uptime` is printed at the start and the end, and every ratio once
more in a closing table: the ratios, not the seconds, are the result on a shared machine.
`--curve` adds the cost curve of analyze --json (10, 100, 1,000, 5,000 nodes: time and peak memory);
`--phases` prints where analyze's time and peak memory go (imports, store read, analysis, JSON), in one
fresh process, through analyze's own path (the narrow runs read, the iterations it needs: this checkout's
API, not for --source); `--source` measures another checkout's src (a before/after pair on the same
machine; it is byte-compiled too, so give it a copy: `git archive main src | tar -x -C /tmp/before`);
`--compare OTHER/src` adds that checkout's analyze and report to the same alternated rounds (before/after
against one peer, on one machine at one time: `git archive main src | tar -x -C /tmp/main`), printed with
its ratios and this tree's time and memory against it; `--keep` writes the campaigns there once and reuses
them. Ratios move by +-15% between runs minutes apart
on this shared 2-vCPU guest: print `uptime` beside them. Each ratio is printed with the lowest and highest
ratio of a single round (the two commands one after the other): a target inside that range is met or missed
by the machine's load as much as by the code.

stdout of every command goes to a file (not a pipe), so the write() pattern is the one a user gets.
The measured src is byte-compiled first (compileall), as an installed tailscope is: with
PYTHONDONTWRITEBYTECODE set (as in this project's shells) a src checkout would otherwise be compiled from
source by every run, which the peer's site-packages never are (0.2-0.3 s of analyze's start-up).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_cluster_analyze import generate

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"  # the tailscope measured (--source: another checkout's src, e.g. before a change)
COMPARE: Path | None = None  # --compare: another checkout's src, measured in the same rounds
COMPARED = " [compare]"  # the suffix of the compared checkout's commands
TIME = "/usr/bin/time"  # GNU time: peak RSS of a child forked from a small process

PEER = """
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
files = sorted((Path(sys.argv[1]) / "shards" / "runs").glob("*.parquet"))
frame = pa.concat_tables([pq.read_table(f, columns=["variant", "node", "value"]) for f in files]).to_pandas()
medians = frame.groupby(["variant", "node"])["value"].median()
sys.stdout.write(medians.reset_index().to_json(orient="records"))
"""

PHASES = """
import resource, sys, time
t0 = time.perf_counter()
from pathlib import Path
from tailscope.verbs import workflow
from tailscope.analysis.cluster import cluster_settings_of
from tailscope.analysis.model import Settings
from tailscope.analysis.figures import with_figures
from tailscope.analysis.summary import ATTRIBUTION_RUN_COLUMNS, STORE_RUN_COLUMNS, analyze
from tailscope.jsonout import encode
from tailscope.store.campaign import Campaign
from tailscope.store.read import connect
def mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
marks = [("imports", time.perf_counter() - t0, mib())]
def mark(name, since):
    marks.append((name, time.perf_counter() - since, mib()))
    return time.perf_counter()
t = time.perf_counter()
campaign = Campaign.open(Path(sys.argv[1]))
con = connect(campaign, runs_also=("probe", "summary"))  # as analyze --json: the summaries in the one read
columns = STORE_RUN_COLUMNS
if not campaign.shard_files("counters"):
    columns = tuple(c for c in columns if c not in ATTRIBUTION_RUN_COLUMNS)
runs = con.runs(columns=columns)
t = mark("store: runs shards read and checked, runs view, to pandas", t)
counters, corunners, nodes = workflow.load_evidence(con, runs["run_id"].astype(str).tolist())
t = mark("store: evidence of the runs (os counters, co-runners, facts)", t)
source = workflow._iteration_source(con, None, None)
settings = cluster_settings_of(campaign.manifest.cluster)
evidence = {"counters": counters, "corunners": corunners, "nodes": nodes}
analysis = analyze(runs, source, Settings(), campaign.campaign_id, settings, **evidence)
t = mark("analysis (summary.analyze, with the iterations it reads)", t)
analysis = workflow.with_attribution(con, analysis, runs)
t = mark("counter attribution check", t)
analysis = with_figures(analysis, con.run_summaries())
con.close()
t = mark("figures of every run (from the runs' summaries, as read)", t)
data = encode(analysis)
t = mark("JSON encoding", t)
for name, seconds, peak in marks:
    print(f"    {name:62s} {seconds:6.2f} s, peak RSS so far {peak:5.0f} MiB")
"""

# (time, memory) against the peer: at 1,000 nodes; at FEW_NODES the fixed cost (FEW_TARGETS)
TARGETS = {"analyze": (1.3, 1.5), "analyze unbuffered": (1.3, 1.5), "report": (1.5, None)}
FEW_NODES = 10
FEW_TARGETS = {"analyze": (1.0, 1.5), "analyze unbuffered": (1.0, 1.5), "report": (1.5, None)}
HELP_TARGET = 1.5  # tailscope --help against `python -c "import argparse"`
VERDICTS: list[str] = []  # every ratio against its target, printed again at the end


def measure(argv: Sequence[str], env: dict[str, str], stdout: Path) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MiB and exit code of one fresh process (stdout to a file).

    The peak RSS is GNU time's (%M): the child's ru_maxrss counts the memory of the process it was forked
    from until exec, so it must be forked from a small process, not from this one (numpy, pyarrow loaded).
    """
    rss_file = stdout.with_suffix(".rss")
    with stdout.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.run(
            [TIME, "-f", "%M", "-o", str(rss_file), *argv], stdout=out, stderr=subprocess.PIPE, env=env
        )
        wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        err = proc.stderr.decode(errors="replace").strip()
        raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}: {err[-2000:]}")
    rss_kib = int(rss_file.read_text().split()[-1])
    return wall, rss_kib / 1024, proc.returncode


def environment(unbuffered: bool, source: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source or SOURCE), env.get("PYTHONPATH")]))
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def commands(root: Path, tmp: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    py = sys.executable
    compared = {}
    if COMPARE is not None:
        compared = {
            "analyze" + COMPARED: (
                [py, "-m", "tailscope", "analyze", str(root), "--json"],
                environment(False, COMPARE),
            ),
            "report" + COMPARED: (
                [py, "-m", "tailscope", "report", str(root), "-o", str(tmp / "c.html")],
                environment(False, COMPARE),
            ),
        }
    return {
        **compared,
        "peer": ([py, "-c", PEER, str(root)], environment(False)),
        "analyze": ([py, "-m", "tailscope", "analyze", str(root), "--json"], environment(False)),
        "analyze unbuffered": ([py, "-m", "tailscope", "analyze", str(root), "--json"], environment(True)),
        "report": (
            [py, "-m", "tailscope", "report", str(root), "-o", str(tmp / "r.html")],
            environment(False),
        ),
    }


ROUNDS: dict[str, list[float]] = {}  # each command's wall seconds in every round of the last run_set


def run_set(
    cmds: dict[str, tuple[list[str], dict[str, str]]], repeats: int, tmp: Path
) -> dict[str, tuple[float, float]]:
    """Median (seconds, MiB) of each command; the commands alternate within every repeat (each round's
    seconds are kept in ROUNDS for `spread`)."""
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for _ in range(repeats):
        for name, (argv, env) in cmds.items():
            wall, rss, _ = measure(argv, env, tmp / f"{name.replace(' ', '_')}.out")
            seen[name].append((wall, rss))
    ROUNDS.clear()
    ROUNDS.update({name: [w for w, _ in v] for name, v in seen.items()})
    return {
        name: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v))
        for name, v in seen.items()
    }


def spread(name: str, against: str) -> str:
    """The lowest and highest of `name`'s time over `against`'s, round by round (the two ran one after the
    other in each round): how far the machine's load moved the ratio while it was measured. The judged
    figure stays the ratio of the medians; a target inside this range is met or missed by the load."""
    pairs = [a / b for a, b in zip(ROUNDS[name], ROUNDS[against], strict=True) if b > 0]
    return f"rounds {min(pairs):.2f}-{max(pairs):.2f}x" if pairs else "no rounds"


def fleet(
    nodes: int, repeats: int, verbs: Sequence[str], keep: Path | None, phases: bool = False
) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        root = (keep / f"fleet{nodes}") if keep else tmp / "fleet"
        if not (root / "campaign.json").exists():
            t0 = time.perf_counter()
            generate(root, nodes, 50, 10, seed=1)
            print(
                f"{nodes} nodes x 50 trials x 10 iterations written in {time.perf_counter() - t0:.1f} s: "
                f"{root}"
            )
        if phases:
            print("  phases of analyze --json (one fresh process):")
            out = subprocess.run(
                [sys.executable, "-c", PHASES, str(root)],
                env=environment(False),
                capture_output=True,
                text=True,
                check=True,
            )
            print(out.stdout.rstrip())
        cmds = {
            k: v for k, v in commands(root, tmp).items() if k == "peer" or k.removesuffix(COMPARED) in verbs
        }
        result = run_set(cmds, repeats, tmp)
        size = (tmp / "analyze.out").stat().st_size if "analyze" in cmds else 0
        compared = tmp / f"analyze{COMPARED.replace(' ', '_')}.out"
        if "analyze" in cmds and compared.exists():
            same = compared.read_bytes() == (tmp / "analyze.out").read_bytes()
            verdict = "the same bytes" if same else "DIFFER"
            print(f"  analyze --json of this tree and the compared one: {verdict}")
    peer_s, peer_mib = result["peer"]
    print(f"  peer (pyarrow + pandas group-by medians): {peer_s:.2f} s, {peer_mib:.0f} MiB")
    for name, (wall, mib) in result.items():
        if name == "peer":
            continue
        t_ratio, m_ratio = wall / peer_s, mib / peer_mib
        if name.endswith(COMPARED):
            mine_s, mine_mib = result[name.removesuffix(COMPARED)]
            print(
                f"  compared {name}: {wall:.2f} s, {mib:.0f} MiB -> {t_ratio:.2f}x time, {m_ratio:.2f}x "
                f"memory of the peer; this tree {mine_s / wall:.2f}x its time, {mine_mib / mib:.2f}x its "
                "memory"
            )
            VERDICTS.append(
                f"  {nodes:5d} nodes  {name:20s} {t_ratio:5.2f}x time  {m_ratio:5.2f}x memory   "
                f"(this tree: {mine_s / wall:.2f}x its time)"
            )
            continue
        t_target, m_target = (FEW_TARGETS if nodes <= FEW_NODES else TARGETS)[name]
        verdict = "meets" if t_ratio <= t_target and (m_target is None or m_ratio <= m_target) else "MISSES"
        limits = f"<= {t_target}x time" + (f", <= {m_target}x memory" if m_target else "")
        extra = f" ({size / 1e6:.1f} MB of JSON)" if name.startswith("analyze") else ""
        rounds = spread(name, "peer")
        print(
            f"  tailscope {name}: {wall:.2f} s, {mib:.0f} MiB{extra} -> {t_ratio:.2f}x time ({rounds}), "
            f"{m_ratio:.2f}x memory; target {limits}: {verdict}"
        )
        VERDICTS.append(
            f"  {nodes:5d} nodes  {name:20s} {t_ratio:5.2f}x time  {m_ratio:5.2f}x memory   "
            f"target {limits}: {verdict}   ({rounds})"
        )
    return result


def start_up(repeats: int) -> None:
    py = sys.executable
    cmds = {
        "python -c pass": ([py, "-c", "pass"], environment(False)),
        'python -c "import argparse"': ([py, "-c", "import argparse"], environment(False)),
        "tailscope --help": ([py, "-m", "tailscope", "--help"], environment(False)),
        "tailscope --version": ([py, "-m", "tailscope", "--version"], environment(False)),
        "tailscope probes": ([py, "-m", "tailscope", "probes"], environment(False)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        result = run_set(cmds, repeats, Path(tmp))
    bare_s, bare_mib = result["python -c pass"]
    arg_s, _ = result['python -c "import argparse"']
    print("start-up:")
    for name, (wall, mib) in result.items():
        print(f"  {name}: {wall * 1000:.0f} ms, {mib:.0f} MiB ({wall / bare_s:.1f}x bare python, "
              f"{wall / arg_s:.2f}x import argparse, {mib / bare_mib:.1f}x its memory)")  # fmt: skip
    ratio = result["tailscope --help"][0] / arg_s
    verdict = "meets" if ratio <= HELP_TARGET else "MISSES"
    rounds = spread("tailscope --help", 'python -c "import argparse"')
    peer = '`python -c "import argparse"`'
    print(f"  target --help <= {HELP_TARGET}x {peer}: {ratio:.2f}x ({rounds}), {verdict}")
    VERDICTS.append(f"  --help {ratio:5.2f}x {peer}   target <= {HELP_TARGET}x: {verdict}   ({rounds})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10])
    parser.add_argument("--repeats", type=int, default=3, help="alternated runs of each command (median)")
    parser.add_argument("--verbs", nargs="+", default=["analyze", "analyze unbuffered", "report"])
    parser.add_argument("--curve", action="store_true", help="cost curve of analyze: 10 .. 5,000 nodes")
    parser.add_argument("--keep", type=Path, help="write (and reuse) the campaigns under this directory")
    parser.add_argument("--no-start-up", action="store_true")
    parser.add_argument("--phases", action="store_true", help="where analyze's time goes, in one process")
    parser.add_argument("--source", type=Path, help="measure the tailscope in this src directory")
    parser.add_argument("--compare", type=Path, help="and this src directory's, in the same rounds")
    args = parser.parse_args()
    global SOURCE, COMPARE
    if args.source:
        SOURCE = args.source.resolve()
    print(f"tailscope from {SOURCE}, python {sys.version.split()[0]}")
    if args.compare:
        COMPARE = args.compare.resolve()
        print(f"compared with the tailscope from {COMPARE}")
        compileall.compile_dir(COMPARE / "tailscope", quiet=1)
    print(f"uptime at the start: {uptime()}")
    compileall.compile_dir(SOURCE / "tailscope", quiet=1)  # as installed: bytecode beside the sources
    if not args.no_start_up:
        start_up(max(args.repeats, 5))
    for nodes in args.nodes:
        print(f"{nodes} nodes:")
        fleet(nodes, args.repeats, args.verbs, args.keep, args.phases)
    if args.curve:
        print("cost curve of analyze --json (one run each):")
        for nodes in (10, 100, 1000, 5000):
            with tempfile.TemporaryDirectory() as tmp_name:
                root = (args.keep / f"fleet{nodes}") if args.keep else Path(tmp_name) / "fleet"
                if not (root / "campaign.json").exists():
                    generate(root, nodes, 50, 10, seed=1)
                argv, env = commands(root, Path(tmp_name))["analyze"]
                wall, mib, _ = measure(argv, env, Path(tmp_name) / "out.json")
            print(f"  {nodes:5d} nodes: {wall:.2f} s, {mib:.0f} MiB ({wall / nodes * 1000:.2f} ms per node)")
    print(f"uptime at the end: {uptime()}")
    print("the ratios (medians of alternated runs, each against its peer in this run; in brackets the lowest")
    print("and highest ratio of one round, the two commands run one after the other):")
    print("\n".join(VERDICTS))


def uptime() -> str:
    """`uptime`'s line: how busy the machine was (the ratios move with it)."""
    out = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "(uptime gave nothing)"


if __name__ == "__main__":
    main()
