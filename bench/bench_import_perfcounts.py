#!/usr/bin/env python3
"""Import throughput of the seed sampler's text format against a plain `awk` pass over the same file.

    PYTHONPATH=src .venv/bin/python bench/bench_import_perfcounts.py [--samples 600] [--repeat 3]

Writes a file of the seed's shape (2 sockets, 96 logical CPUs x 7 core events, 2 x 24 CHAs x 4, 2 x 6 IMC
channels x 5, RAPL and status registers: ~1,300 series per sample, 48-bit values that wrap, hex status words)
and times, best of --repeat:
  - awk (plain):  one field-splitting pass that sums the values (the cheapest useful awk over the file);
  - awk (deltas): the seed's post-processing in awk: strip the sample index, wrap-corrected delta per series;
  - tailscope parse (native): perfcounts.parse with libtailscope_perfscan.so (every check of the importer:
    syntax, layout, ranges, sample numbering), when $TAILSCOPE_NATIVE_LIB_DIR or the install has it;
  - tailscope parse (pyarrow): the same without the native scanner (pyarrow CSV reader + string kernels);
  - tailscope import: import_perfcounts in this process (parse + samples table + Parquet shard + manifest);
  - tailscope CLI: `tailscope import perfcounts` as a fresh process (Python start-up included).
Prints MB/s of each, the commands, and the ratios import/awk. The target (issue 3) is import >= 5x awk.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

W48 = 2**48
AWK_PLAIN = "{ s += $2 } END { print NR, s }"
AWK_DELTAS = (
    '{ k = $1; sub(/\\[[0-9]+\\]$/, "", k); v = $2 + 0; '
    "if (k in last) { d = v - last[k]; if (d < 0) d += 2^48; tot[k] += d } last[k] = v } "
    "END { n = 0; for (k in tot) n++; print n }"
)


def write_file(path: Path, samples: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    names = [
        f'core_fixed_counts[{c}]["{e}"]'
        for c in range(96)
        for e in ("Inst_Retired.Any", "CPU_CLK_Unhalted.Core", "CPU_CLK_Unhalted.Ref")
    ]
    names += [
        f'core_counts[{c}]["{e}"]'
        for c in range(96)
        for e in ("L2_LINES_IN.ALL", "L2_RQSTS.MISS", "CYCLE_ACTIVITY.STALLS_L2_MISS", "L1D.REPLACEMENT")
    ]
    names += [
        f'cha_counts[{s}][{c}]["{e}"]'
        for s in (0, 1)
        for c in range(24)
        for e in ("SF_EVICTION.M_STATE", "SF_EVICTION.E_STATE", "SF_EVICTION.S_STATE", "LLC_LOOKUP.DATA_READ")
    ]
    names += [
        f'imc_counts[{s}][{c}]["{e}"]'
        for s in (0, 1)
        for c in range(6)
        for e in ("CAS_COUNT.READS", "CAS_COUNT.WRITES", "ACT.ALL", "PRE_COUNT.MISS", "DCLK")
    ]
    state = [rnd.randrange(0, W48) for _ in names]
    steps = [rnd.randrange(1, 10**9) for _ in names]
    with open(path, "w") as fh:
        fh.write("TSC_ratio = 21\nnr_cpus = 96\nReference_TSC = 25370245177304324\n")
        fh.write("Reference_WallTime = 1532379481.075971\n")
        fh.writelines(f"IA32_FIXED_CTR_CTRL[{c}] = 0x333\n" for c in range(96))
        for s in range(samples):
            out = [f"tsc[{s}] = {25370245187777968 + s * 2_100_000_000}",
                   f"walltime[0][{s}] = {1532379481 + s}",
                   f"walltime[1][{s}] = 80968"]  # fmt: skip
            for sock in (0, 1):
                out.append(f"rapl_pkg_energy[{sock}][{s}] = {(1419877153 + s * 12_345_678) % 2**32}")
                out.append(f"pkg_therm_status[{sock}][{s}] = {hex(0x88390800 + (s % 7))}")
            for i, name in enumerate(names):
                out.append(f"{name}[{s}] = {state[i]}")
                state[i] = (state[i] + steps[i]) % W48
            fh.write("\n".join(out) + "\n")


def _import_into(path: Path, root: Path) -> None:
    from tailscope.importers import perfcounts
    from tailscope.store.load import load_into

    with load_into(root, "bench", create=True) as load:
        perfcounts.import_perfcounts(path, load, task="bench")


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    awk = shutil.which("mawk") or shutil.which("awk") or shutil.which("gawk")
    if awk is None:
        sys.exit("no awk found")
    from tailscope.importers import perfcounts

    native = perfcounts._perfscan()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench-node.perfcounts.lua"
        write_file(path, args.samples)
        size_mb = path.stat().st_size / 1e6
        with open(path, "rb") as fh:
            lines = sum(1 for _ in fh)
        print(f"file: {path.name}, {size_mb:.1f} MB, {lines} lines, {args.samples} samples")
        print(
            f"native scanner: {'libtailscope_perfscan.so' if native else 'not found (pyarrow reader only)'}"
        )
        awk_plain = [awk, "-F", " = ", AWK_PLAIN, str(path)]
        awk_deltas = [awk, "-F", " = ", AWK_DELTAS, str(path)]
        n = [0]

        def run_import() -> None:
            n[0] += 1
            _import_into(path, Path(f"{tmp}/i{n[0]}"))

        def run_cli() -> None:
            n[0] += 1
            subprocess.run(
                [sys.executable, "-m", "tailscope", "import", "perfcounts", str(path),
                 "--campaign", f"{tmp}/c{n[0]}"],
                check=True, capture_output=True,
            )  # fmt: skip

        results = {
            "awk (plain)": best(
                lambda: subprocess.run(awk_plain, check=True, capture_output=True), args.repeat
            ),
            "awk (deltas)": best(
                lambda: subprocess.run(awk_deltas, check=True, capture_output=True), args.repeat
            ),
        }
        if native is not None:
            results["tailscope parse (native)"] = best(
                lambda: perfcounts._read_native(path, native), args.repeat
            )
        results["tailscope parse (pyarrow)"] = best(lambda: perfcounts._read_fast(path), args.repeat)
        results["tailscope import"] = best(run_import, args.repeat)
        results["tailscope CLI"] = best(run_cli, args.repeat)
        print(f"awk: {awk}")
        print(f"  plain:  {' '.join(awk_plain[:3])} '{AWK_PLAIN}' FILE")
        print(f"  deltas: {' '.join(awk_deltas[:3])} '{AWK_DELTAS}' FILE")
        print(
            f"  CLI:    {sys.executable} -m tailscope import perfcounts FILE --campaign DIR "
            "(process start included)"
        )
        for name, seconds in results.items():
            print(f"{name:26s} {seconds:8.3f} s  {size_mb / seconds:8.1f} MB/s")
        for awk_name in ("awk (plain)", "awk (deltas)"):
            for ts_name in [k for k in results if k.startswith("tailscope")]:
                ratio = results[awk_name] / results[ts_name]
                print(f"ratio {ts_name} vs {awk_name}: {ratio:.2f}x (target >= 5x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
