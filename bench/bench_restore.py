#!/usr/bin/env python3
"""How long a node stays changed after `tailscope inject` is SIGKILLed (the node-state journal's restore
helper puts it back), beside a SIGTERM of the same run (its own cleanup) measured in the same run.

For each kind, N times: start `tailscope inject KIND`, wait for its ready line, send the signal, and poll the
node every 1 ms until it is as before: the cgroup gone and the victim back in its own (cpu-quota),
/proc/sys/vm/compact_unevictable_allowed back and tsinject gone (thp-fragment). Prints the medians, the
helper's own figure ("restore took"), and the ratio SIGKILL / SIGTERM. Needs root.

    python bench/bench_restore.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

COMPACT = Path("/proc/sys/vm/compact_unevictable_allowed")


def cgroup_of(pid: int) -> str:
    from tailscope.inject.cgroups import cpu_hierarchy

    return str(cpu_hierarchy().cgroup_of(pid))


def tsinject_pids() -> set[int]:
    """Running tsinject processes (a zombie has exited and freed its memory: it waits only for init)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if "(tsinject)" in stat and stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                out.add(int(d.name))
    return out


def once(
    args: list[str], sig: int, restored: Callable[[dict[str, object]], bool], env: dict[str, str]
) -> tuple[float, float | None]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tailscope", "inject", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if '"ready"' not in line:
        proc.kill()
        raise SystemExit(f"inject {' '.join(args)}: no ready line: {proc.communicate()[1].strip()}")
    ready = json.loads(line)
    t0 = time.perf_counter()
    os.kill(proc.pid, sig)
    while not restored(ready):
        if time.perf_counter() - t0 > 60:
            raise SystemExit(f"inject {' '.join(args)}: not restored within 60 s of signal {sig}")
        time.sleep(0.001)
    took = time.perf_counter() - t0
    _, err = proc.communicate(timeout=60)
    said = re.search(r"restore took ([0-9.]+) s", err)
    return took, float(said.group(1)) if said else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (cgroups, /proc/sys)", file=sys.stderr)
        return 2
    env = {**os.environ, "TAILSCOPE_JOURNAL_DIR": tempfile.mkdtemp(prefix="bench-restore-")}
    victim = subprocess.Popen(["sleep", "3600"])
    origin = cgroup_of(victim.pid)
    compact = COMPACT.read_text()
    before = tsinject_pids()
    cases = {
        "cpu-quota": (
            ["cpu-quota", "--pid", str(victim.pid), "--intensity", "0.5"],
            lambda r: not Path(str(r["cgroup"])).exists() and cgroup_of(victim.pid) == origin,
        ),
        "thp-fragment": (
            ["thp-fragment", "--intensity", "0.01", "--reserve", "1g"],
            lambda r: COMPACT.read_text() == compact and not (tsinject_pids() - before),
        ),
    }
    print(f"{'kind':14s} {'signal':8s} {'restored after (median, min-max)':>36s} {'helper said':>12s}")
    try:
        for kind, (args, restored) in cases.items():
            medians = {}
            for sig in (signal.SIGTERM, signal.SIGKILL):
                runs = [once(args, sig, restored, env) for _ in range(opts.repeat)]
                took = [t for t, _ in runs]
                said = [s for _, s in runs if s is not None]
                medians[sig] = statistics.median(took)
                helper = f"{statistics.median(said) * 1e3:.1f} ms" if said else "-"
                print(
                    f"{kind:14s} {sig.name:8s} {medians[sig] * 1e3:>14.1f} ms ({min(took) * 1e3:.1f}-"
                    f"{max(took) * 1e3:.1f} ms) {helper:>12s}"
                )
            print(f"{kind:14s} SIGKILL / SIGTERM: {medians[signal.SIGKILL] / medians[signal.SIGTERM]:.2f}")
    finally:
        victim.kill()
        victim.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
