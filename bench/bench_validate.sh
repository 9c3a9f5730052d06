#!/usr/bin/env bash
# `tailscope validate` for real on this node: a campaign of N trials (default 200) of the stream probe with a
# random, recorded schedule of every injector that can act here, then its scores (recall per injector and
# intensity, false positives on clean trials, top-1/top-2 cause accuracy, confusion matrix; 95% Clopper-Pearson).
#
#     bench/bench_validate.sh [TRIALS] [SEED] [extra validate options...]
#
# Run as root (cpu-quota makes a cgroup, thp-fragment reads page frames). Prints the table and keeps the JSON
# beside the campaign (DIR.json).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
trials=${1:-200}
seed=${2:-2026}
shift $(( $# > 2 ? 2 : $# ))
dir=${TAILSCOPE_CAMPAIGNS:-/tmp}/validate-bench-$(date +%Y%m%d-%H%M%S)
python=${PYTHON:-$root/.venv/bin/python}
"$python" -m tailscope validate --trials "$trials" --seed "$seed" --campaign "$dir" --no-progress --json "$@" \
  > "$dir.json"
"$python" - "$dir.json" <<'PY'
import json, sys
from tailscope.inject.validate import render_scores
print("\n".join(render_scores(json.load(open(sys.argv[1])))))
PY
