#!/usr/bin/env bash
# `tailscope validate` for real on this node: a campaign of N trials (default 200) of the stream probe with a
# random, recorded schedule of every injector that can act here, then its scores (recall per injector and
# intensity, false positives on clean trials, top-1/top-2 cause accuracy, confusion matrix; 95% Clopper-Pearson).
#
#     bench/bench_validate.sh [TRIALS] [SEED] [extra validate options...]
#
# Run as root (cpu-quota makes a cgroup, thp-fragment reads page frames). Prints the table and keeps the JSON
# beside the campaign (DIR.json).
#
# memthrash (memory-pressure by paging) acts only where the node has swap. With SWAP_GIB=N set and no swap
# on, the script makes an N GiB swap file for the run (mkswap + swapon, as root) and removes it at exit,
# interrupted or not, so the memory-pressure figures are measured rather than skipped: SWAP_GIB=8.
set -euo pipefail
swapfile=""
cleanup() {
  if [[ -n $swapfile ]]; then
    swapoff "$swapfile" 2>/dev/null || true
    rm -f "$swapfile"
  fi
}
trap cleanup EXIT
if [[ -n ${SWAP_GIB:-} && ! ${SWAP_GIB} =~ ^[1-9][0-9]{0,3}$ ]]; then
  echo "bench_validate: SWAP_GIB=${SWAP_GIB}: expected a whole number of GiB, 1 to 9999" >&2
  exit 2
fi
if [[ -n ${SWAP_GIB:-} && $(id -u) -ne 0 ]]; then
  echo "bench_validate: SWAP_GIB needs root (mkswap, swapon)" >&2
  exit 2
fi
if [[ -n ${SWAP_GIB:-} ]] && ! awk 'NR > 1 { found = 1 } END { exit !found }' /proc/swaps; then
  swapfile=${TMPDIR:-/var/tmp}/tailscope-validate-$$.swap
  echo "bench_validate: making a ${SWAP_GIB} GiB swap file $swapfile for memthrash (removed at exit)" >&2
  dd if=/dev/zero of="$swapfile" bs=1M count=$(( SWAP_GIB * 1024 )) status=none
  chmod 600 "$swapfile"
  mkswap -q "$swapfile"
  swapon "$swapfile"
fi
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
