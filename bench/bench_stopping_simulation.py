#!/usr/bin/env python3
"""The error rates of `check`'s anytime-valid stopping, by simulation at full size (issue 33).

    PYTHONPATH=src .venv/bin/python bench/bench_stopping_simulation.py [--sequences 10000] [--cap 200]

10,000 synthetic sequences per case (analysis/stopping_sim.py: healthy, level shifts of 3, 5 and 10%, slow-run
rates of 1, 2 and 5%), each judged after every trial by the rules `check` uses and stopped when settled or at
the cap; noise log-normal (sd 1%, and 2% with --sigma) or Student t(4) of the same sd. Prints per case the
verdicts at the stop, mean/median trials, the false claims at the stop and at any look, the same test done
the fixed-n way at every look (naive@any), and how often the slow-run test would have found a degraded
rate by the cap had the probe not stopped (deg@cap: the power stopping gives up). Then one line per case
whose truth is "not degraded": PASS when its false claims at any look are at most the stated level (1 -
confidence = 5%) within 3 binomial sds of the estimate, else FAIL. Exit 1 on a FAIL.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from tailscope.analysis.model import Settings
from tailscope.analysis.stopping_sim import run_cases, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sequences", type=int, default=10_000)
    parser.add_argument("--cap", type=int, default=200, help="trial cap (l2sum's in check: 200)")
    parser.add_argument("--sigma", type=float, default=0.01, help="sd of the log values (default 0.01)")
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args()
    settings = Settings()
    level = 1.0 - settings.confidence
    start = time.perf_counter()
    results = run_cases(settings, sequences=args.sequences, cap=args.cap, seed=args.seed, sigma=args.sigma)
    elapsed = time.perf_counter() - start
    limits = (
        f"level {settings.max_level_drop:g} below the baseline, slow-run rate {settings.max_slow_rate:g} "
        f"(threshold {settings.primary_threshold:g}), confidence {settings.confidence:g}, "
        f"alpha {settings.alpha:g}"
    )
    print(
        f"stopping simulation: {args.sequences} sequences per case, cap {args.cap}, sigma {args.sigma:g}, "
        f"limits: {limits}; {elapsed:.0f} s"
    )
    print("\n".join(table(results)))
    failed = 0
    for r in results:
        if r.truth != "not degraded":
            continue
        slack = 3 * math.sqrt(level * (1 - level) / r.sequences)
        ok = r.false_any_look <= level + slack
        failed += not ok
        print(
            f"{'PASS' if ok else 'FAIL'} {r.case.name} ({r.case.noise}): false claims at any look "
            f"{r.false_any_look:.4f} <= {level:g} (+{slack:.4f}, 3 binomial sds); at the stop "
            f"{r.false_at_stop:.4f}; "
            f"a fixed-n test looked at every trial: "
            + ("-" if math.isnan(r.naive_any_look) else f"{r.naive_any_look:.4f}")
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
