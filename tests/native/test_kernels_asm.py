"""The timed loops survive the optimiser: their machine code does the floating-point work the source names.

google/benchmark's donotoptimize_assembly_test idea, applied to the built executables: each kernel is an
exported function (the probes link with -rdynamic, so the names survive `strip`), located with `nm -D -S`
and disassembled with `objdump -d` (binutils). A kernel that the compiler folded, hoisted out of its loop or
replaced by a library call would fail these checks; tests/native/test_l2sum.py and test_fwq.py check at
run time that time grows with the work.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from probe_runs import cpu_flags

from tailscope.native import native_path

pytestmark = pytest.mark.skipif(
    not (shutil.which("objdump") and shutil.which("nm")), reason="needs binutils (objdump, nm)"
)


def disassemble(probe: str, function: str) -> list[tuple[int, str]]:
    """[(address, instruction text)] of one exported function."""
    exe = str(native_path(probe))
    symbols = subprocess.run(
        ["nm", "-D", "-S", "--defined-only", exe], capture_output=True, text=True, check=True
    )
    for line in symbols.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == function:
            start, size = int(parts[0], 16), int(parts[1], 16)
            break
    else:
        pytest.fail(f"{function} is not an exported symbol of {exe}")
    dump = subprocess.run(
        [
            "objdump",
            "-d",
            "--no-show-raw-insn",
            f"--start-address={start:#x}",
            f"--stop-address={start + size:#x}",
            exe,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out = []
    for line in dump.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)$", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip()))
    assert out, f"no instructions for {function}"
    return out


def loop_bodies(code: list[tuple[int, str]]) -> list[list[str]]:
    """Instructions between the target and the source of every backward branch (the loops)."""
    bodies = []
    for addr, text in code:
        m = re.match(r"j\w+\s+([0-9a-f]+)\b", text)
        if m and int(m.group(1), 16) < addr:
            target = int(m.group(1), 16)
            bodies.append([t for a, t in code if target <= a <= addr])
    return bodies


def has_loop_with(code: list[tuple[int, str]], *patterns: str) -> bool:
    return any(all(any(re.search(p, t) for t in body) for p in patterns) for body in loop_bodies(code))


VARIANTS = {
    "avx512f": ({"avx512f"}, r"%zmm"),
    "avx2": ({"avx2", "fma"}, r"%ymm"),
    "sse2": (set(), r"%xmm"),
}


@pytest.mark.parametrize("isa", VARIANTS)
def test_l2sum_pass_adds_vectors_in_a_loop(isa):
    _, reg = VARIANTS[isa]
    code = disassemble("l2sum", f"l2sum_pass_{isa}")
    add = r"^v?addpd\s" if isa != "sse2" else r"^addpd\s"
    assert has_loop_with(code, add + r".*" + reg), "\n".join(t for _, t in code)
    # several independent accumulators: at least 4 distinct vector registers are added into in the loop
    loop = max(loop_bodies(code), key=lambda body: sum(bool(re.search(add, t)) for t in body))
    targets = {re.findall(r"%[xyz]mm\d+", t)[-1] for t in loop if re.search(add, t)}
    assert len(targets) >= 4, targets
    assert not any(t.startswith("call") for _, t in code)


@pytest.mark.parametrize("isa", VARIANTS)
def test_stream_triad_nt_streams_fused_results(isa):
    _, reg = VARIANTS[isa]
    code = disassemble("stream", f"stream_triad_nt_{isa}")
    if isa == "sse2":
        assert has_loop_with(code, r"^mulpd\s", r"^addpd\s", r"^movntpd\s.*%xmm")
    else:
        assert has_loop_with(code, r"^vfmadd\d+pd\s.*" + reg, r"^vmovntpd\s+" + reg)
    assert any(t.startswith("sfence") for _, t in code)


@pytest.mark.parametrize("kernel", ["copy", "scale", "add", "triad"])
@pytest.mark.parametrize("isa", VARIANTS)
def test_stream_kernels_are_vector_loops_without_calls(isa, kernel):
    _, reg = VARIANTS[isa]
    for stores in ("nt", "cached"):
        code = disassemble("stream", f"stream_{kernel}_{stores}_{isa}")
        # a store of a whole vector register of this width to memory, inside a loop
        store = (
            (r"^v?movntpd\s+" if stores == "nt" else r"^v?mov(?:[ua]p[sd]|dq[ua]\d*)\s+")
            + reg
            + r"\d+,\s*\S*\("
        )
        assert has_loop_with(code, store), f"{kernel} {stores} {isa}"
        assert not any(t.startswith("call") for _, t in code), "a kernel became a library call (memcpy?)"


def test_fwq_work_is_a_dependent_multiply_chain():
    code = disassemble("fwq", "fwq_work")
    assert has_loop_with(code, r"^imul\s", r"^add\s")


def test_this_cpu_runs_the_widest_variant():
    """On this machine the probes pick the variant the tests above inspected first."""
    flags = cpu_flags()
    best = "avx512f" if "avx512f" in flags else "avx2" if {"avx2", "fma"} <= flags else "sse2"
    from probe_runs import run_probe

    assert run_probe("l2sum", "--check-args").params["kernel_isa"] == best
    assert run_probe("stream", "--check-args").params["kernel_isa"] == best


def test_latency_chase_is_sixteen_dependent_loads():
    code = disassemble("latency", "latency_chase")
    loop = max(loop_bodies(code), key=len)
    loads = [t for t in loop if re.match(r"^mov\s+\((%r\w+)\),\1$", t)]
    assert len(loads) == 16, loop  # p = *(void **)p: the loaded value is the next address
    assert not any(t.startswith("call") for _, t in code)


def test_effective_clock_chain_is_dependent_adds():
    """ts_clock.h's chain (linked into every probe that measures the clock): 64 register-register adds.

    Register-register: Golden Cove and later Intel cores fold adds of an immediate in the renamer, and the
    `add $0x1` chain of the first wave read 22.6 GHz on a 2.6 GHz Sapphire-Rapids-class guest."""
    code = disassemble("latency", "ts_clock_chain")
    loop = max(loop_bodies(code), key=len)
    pairs = [(m.group(1), m.group(2)) for t in loop if (m := re.match(r"^add\s+(%r\w+),(%r\w+)$", t))]
    chain = max(set(pairs), key=pairs.count)
    assert pairs.count(chain) == 64 and chain[0] != chain[1], loop
    # nothing else adds an immediate to the chain's register (the loop counter is another register)
    assert not [t for t in loop if re.match(rf"^add\s+\$0x\w+,{chain[1]}$", t)], loop


@pytest.mark.parametrize(
    ("kernel", "insn", "flags"),
    [
        ("fp64_avx512f_fma", r"^vfmadd\d+pd\s.*%zmm", {"avx512f"}),
        ("fp32_avx2_add", r"^vaddps\s.*%ymm", {"avx2", "fma"}),
        ("fp64_avx512f_sub", r"^vsubpd\s.*%zmm", {"avx512f"}),
        ("fp32_scalar_sse2_sub", r"^subss\s", set()),
        ("fp64_scalar_fma_div", r"^vdivsd\s", {"avx2", "fma"}),
        ("fp64_scalar_sse2_sqrt", r"^sqrtsd\s", set()),
        # FP16 (AVX512-FP16): compiled here, run only on CPUs that have it (tests/hosts: which of them do)
        ("fp16_avx512fp16_fma", r"^vfmadd\d+ph\s.*%zmm", {"avx512fp16"}),
        ("fp16_avx512fp16_sqrt", r"^vsqrtph\s.*%zmm", {"avx512fp16"}),
        ("fp16_scalar_div", r"^vdivsh\s", {"avx512fp16"}),
        ("fp16_scalar_add", r"^vaddsh\s", {"avx512fp16"}),
        ("fp16_avx512fp16_sub", r"^vsubph\s.*%zmm", {"avx512fp16"}),
    ],
)
def test_arith_chains(kernel, insn, flags):
    """lat: every operation writes one register (one chain); thr: twelve registers (the chains stay apart)."""
    del flags  # the kernels are compiled for their instruction set whatever this CPU has
    for kind, chains in (("lat", 1), ("thr", 12)):
        code = disassemble("arith", f"arith_{kernel}_{kind}")
        loop = max(loop_bodies(code), key=lambda body: sum(bool(re.search(insn, t)) for t in body))
        ops = [t for t in loop if re.search(insn, t)]
        dests = {re.findall(r"%[xyz]mm\d+", t)[-1] for t in ops}
        assert len(ops) >= 8 and len(dests) == chains, (kind, loop)
        assert not any(t.startswith("call") for _, t in code)
