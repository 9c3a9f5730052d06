#!/usr/bin/env python3
"""`addr map` throughput: the native kernel against a per-address Python loop and a plain numpy version.

    PYTHONPATH=src .venv/bin/python bench/bench_addr_map.py [--model SKX_24] [--n 20000000] [--text]

All three map the same random addresses (below the model's valid range) with the same model, one thread,
and must agree on every address they both map. Reported: addresses/s of each (best of --repeat), the
kernel's speed-up over each peer, and whether the kernel reaches the target of 100 M addresses/s on one
core. The Python loop maps only --python-n addresses (it is ~10^4 times slower). With --text, also the
end-to-end text path of `addr map --input` (parse + map + format, what a script sees).
The peers exist only here: the product has one implementation (tailscope.addr.kernel).

Figures seen on the 2-vCPU KVM development VM (Intel Xeon, GCC 12 -O2, 20 M addresses, best of 5; the VM's
run-to-run spread is ~30%): SKX_24 kernel 300-470 M addr/s (26-46x numpy at ~10-12 M/s, ~1500-3400x the
Python loop at 0.14-0.2 M/s); ICX_28 (14 permutation bits) 460 M/s, 69x numpy; text path of `addr map
--input` ~15 M lines/s. Target (>= 100 M/s on one core) met.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from tailscope.addr.model import SliceHashModel
from tailscope.addr.tables import builtin_model

TARGET = 100e6


def python_loop(model: SliceHashModel, addresses: list[int]) -> list[int]:
    """The formula as a straightforward Python loop: popcount parity per mask, index, lookup."""
    base = model.base.tolist()
    masks = [model.mask(k) for k in range(model.index_bits)]
    length = model.length
    out = []
    for pa in addresses:
        p = 0
        for k, m in enumerate(masks):
            p |= (bin(pa & m).count("1") & 1) << k
        out.append(base[((pa >> 6) % length) ^ p])
    return out


def numpy_version(model: SliceHashModel, addresses: np.ndarray) -> np.ndarray:
    """The straightforward vectorised version: one popcount-parity pass per permutation bit."""
    p = np.zeros(addresses.shape, dtype=np.int64)
    for k in range(model.index_bits):
        p |= (np.bitwise_count(addresses & np.uint64(model.mask(k))) & 1).astype(np.int64) << k
    index = ((addresses >> np.uint64(6)) & np.uint64(model.length - 1)).astype(np.int64) ^ p
    return model.base[index]


def best_rate(fn, n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return n / best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SKX_24", help="built-in model (default SKX_24)")
    parser.add_argument("--n", type=int, default=20_000_000, help="addresses for the kernel and numpy")
    parser.add_argument("--python-n", type=int, default=200_000, help="addresses for the Python loop")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--text", action="store_true", help="also time the text path of `addr map --input`")
    args = parser.parse_args()
    if hasattr(os, "sched_getaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    model = builtin_model(args.model)
    rng = np.random.default_rng(args.seed)
    addresses = rng.integers(0, model.valid_limit, args.n, dtype=np.uint64)
    small = addresses[: args.python_n].tolist()

    kernel_out = model.slices(addresses)
    assert (numpy_version(model, addresses) == kernel_out).all(), "numpy peer disagrees with the kernel"
    assert python_loop(model, small) == kernel_out[: args.python_n].tolist(), "Python loop disagrees"

    kernel = best_rate(lambda: model.slices(addresses), args.n, args.repeat)
    vectorised = best_rate(lambda: numpy_version(model, addresses), args.n, args.repeat)
    loop = best_rate(lambda: python_loop(model, small), args.python_n, max(1, args.repeat // 2))

    print(
        f"model {model.name}: {model.index_bits} permutation bits, "
        f"masks on bits {model.low_bit}..{model.high_bit}"
    )
    print(f"{'implementation':<22} {'addresses':>11} {'M addr/s':>10} {'kernel speed-up':>16}")
    print(f"{'native kernel (C)':<22} {args.n:>11} {kernel / 1e6:>10.1f} {'1.0x':>16}")
    print(f"{'numpy (vectorised)':<22} {args.n:>11} {vectorised / 1e6:>10.1f} {kernel / vectorised:>15.1f}x")
    print(f"{'Python loop':<22} {args.python_n:>11} {loop / 1e6:>10.3f} {kernel / loop:>15.0f}x")
    if args.text:
        from tailscope.addr.addresses import parse_address_text
        from tailscope.addr.kernel import format_lines

        text = "".join(f"0x{a:x}\n" for a in addresses[: min(args.n, 5_000_000)].tolist()).encode()
        count = text.count(b"\n")

        def text_path() -> None:
            values = parse_address_text(text, "bench")
            format_lines(model.slices(values))

        rate = best_rate(text_path, count, max(1, args.repeat // 2))
        print(f"{'text path (parse+map+format)':<22} {count:>11} {rate / 1e6:>10.1f}")
    met = "met" if kernel >= TARGET else "NOT met"
    print(f"target: >= {TARGET / 1e6:.0f} M addresses/s on one core -> {met} ({kernel / 1e6:.0f} M/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
