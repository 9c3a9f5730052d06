"""arith on aarch64, cross-built with Debian's gcc-aarch64-linux-gnu and run under qemu-user.

Under emulation the timings are the emulator's: what is tested is which kernels run for the CPU qemu
emulates (QEMU_CPU=max: FEAT_FP16 and SVE; cortex-a57: neither), that every lane of every chain validates
against its scalar replay, the JSON contract (table rows per precision, width and op, skipped with reasons),
and, in the disassembly, that the kernels and the effective-clock chain are the instructions they claim
(a dependent `add xD, xN, xD` register chain for the clock). The cross build is cached under
/var/cache/tailscope-tests keyed by the native sources' hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hosts.hostroot import NAMES, load
from tailscope.node.facts import cpu_flags

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("TAILSCOPE_TEST_CACHE", "/var/cache/tailscope-tests"))
SYSROOT = "/usr/aarch64-linux-gnu"
TOOLS = ("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", "aarch64-linux-gnu-nm", "qemu-aarch64-static",
         "cmake", "ninja")  # fmt: skip

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS) or not Path(SYSROOT).is_dir(),
    reason="needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static, cmake and ninja",
)

OPS = ["add", "sub", "mul", "div", "fma", "sqrt"]
ARM_HOSTS = [n for n in NAMES if load(n).doc["host"]["machine"] == "aarch64"]


def _sources_hash() -> str:
    h = hashlib.sha256()
    for p in sorted([ROOT / "CMakeLists.txt", *(ROOT / "native").rglob("*")]):
        if p.is_file():
            h.update(str(p.relative_to(ROOT)).encode())
            h.update(p.read_bytes())
    cc = subprocess.run(["aarch64-linux-gnu-gcc", "--version"], capture_output=True, text=True, check=True)
    h.update(cc.stdout.encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="module")
def arith_arm() -> Path:
    """The cross-built aarch64 arith executable (cached by the sources' hash)."""
    exe = CACHE / f"arith-aarch64-{_sources_hash()}" / "arith"
    if exe.is_file():
        return exe
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        build = Path(tmp) / "build"
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
            "-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
            "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc", f"-DCMAKE_FIND_ROOT_PATH={SYSROOT}",
            "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY", "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY",
            "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER", "-DTAILSCOPE_DGEMM=OFF", "-DTAILSCOPE_MPI=OFF",
        ]  # fmt: skip
        for argv in (configure, ["cmake", "--build", str(build), "--target", "arith"]):
            done = subprocess.run(argv, capture_output=True, text=True)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        out = Path(tmp) / "out"
        out.mkdir()
        shutil.copy2(build / "native" / "arith", out / "arith")
        try:
            os.rename(out, exe.parent)  # atomic: a concurrent run either sees all of it or builds its own
        except OSError:
            if not exe.is_file():
                raise
    return exe


def run_arith(
    exe: Path, cpu: str, *args: str, env: dict[str, str] | None = None
) -> tuple[int, list[dict[str, Any]]]:
    e = {**os.environ, "QEMU_LD_PREFIX": SYSROOT, "QEMU_CPU": cpu, **(env or {})}
    argv = ["qemu-aarch64-static", str(exe), "--ops", "64", "--iterations", "1", "--clock-chunks", "1", *args]
    done = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=120)
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _one(records: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [r for r in records if r["record"] == kind]
    assert found, f"no {kind} record"
    return found[0]


def _flavours(result: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    rows: dict[tuple[str, str], list[str]] = {}
    for r in result["summary"]["table"]:
        rows.setdefault((r["precision"], r["width"]), []).append(r["op"])
    return rows


def test_max_cpu_runs_fp16_neon_and_sve(arith_arm):
    """QEMU_CPU=max has FEAT_FP16 and SVE (512-bit by default): nine flavours, six ops each, all validated."""
    rc, recs = run_arith(arith_arm, "max")
    assert rc == 0, recs[-3:]
    config, result = _one(recs, "config"), _one(recs, "result")
    assert config["params"]["kernel_isa"] == "sve"
    assert config["params"]["emulated"] is True
    assert any(r["record"] == "warning" and r["code"] == "arith_emulated" for r in recs)
    flav = _flavours(result)
    assert set(flav) == {(p, w) for p in ("fp16", "fp32", "fp64") for w in ("scalar", "neon", "sve")}
    assert all(ops == OPS for ops in flav.values()), flav
    assert result["summary"]["skipped"] == []
    assert result["summary"]["headline_kernel"] == "fp64_sve_fma_thr"
    bits = {(r["precision"], r["width"]): (r["bits"], r["lanes"]) for r in result["summary"]["table"]}
    assert bits[("fp64", "neon")] == (128, 2) and bits[("fp16", "neon")] == (128, 8)
    assert bits[("fp64", "sve")] == (512, 8) and bits[("fp16", "sve")] == (512, 32)
    # figures, never refused (the emulator's cycles are not judged; a 64-op iteration may read 0 ticks)
    assert all(isinstance(r["rthroughput_cycles"]["median"], float | int) for r in result["summary"]["table"])
    assert {c["outcome"] for c in result["summary"]["checks"]} == {"not_judged_emulated"}
    validation = [r for r in recs if r["record"] == "validation"]
    assert [v["passed"] for v in validation] == [True]


def test_longest_sve_vector_fits(arith_arm):
    """2048-bit SVE (the architecture's longest): 128 FP16 lanes per register, every one validated."""
    rc, recs = run_arith(arith_arm, "max,sve-default-vector-length=256")
    assert rc == 0, recs[-3:]
    table = _one(recs, "result")["summary"]["table"]
    bits = {(r["precision"], r["width"]): (r["bits"], r["lanes"]) for r in table}
    assert bits[("fp16", "sve")] == (2048, 128) and bits[("fp64", "sve")] == (2048, 32)


def test_cortex_a57_has_neither_fp16_nor_sve(arith_arm):
    """Armv8.0 (Cortex-A57): FP32/FP64 scalar and NEON only; FP16 and SVE are skipped with their reasons."""
    rc, recs = run_arith(arith_arm, "cortex-a57")
    assert rc == 0, recs[-3:]
    config, result = _one(recs, "config"), _one(recs, "result")
    assert config["params"]["kernel_isa"] == "neon"
    assert not any("fp16" in k or "sve" in k for k in config["params"]["kernels"])
    assert set(_flavours(result)) == {(p, w) for p in ("fp32", "fp64") for w in ("scalar", "neon")}
    assert result["summary"]["headline_kernel"] == "fp64_neon_fma_thr"
    reasons = {(s["precision"], s["width"]): s["reason"] for s in result["summary"]["skipped"]}
    assert "HWCAP_SVE" in reasons[("all", "sve")]
    assert "FEAT_FP16" in reasons[("fp16", "all")]


def test_no_sve_asked_measures_neon_only(arith_arm):
    """TAILSCOPE_ARITH_NO_SVE=1 on an SVE CPU: NEON is the widest, the choice is named as forced."""
    rc, recs = run_arith(arith_arm, "max", env={"TAILSCOPE_ARITH_NO_SVE": "1"})
    assert rc == 0, recs[-3:]
    config, result = _one(recs, "config"), _one(recs, "result")
    assert config["params"]["kernel_isa"] == "neon" and config["params"]["kernel_isa_forced"] is True
    assert {w for _, w in _flavours(result)} == {"scalar", "neon"}
    assert "TAILSCOPE_ARITH_NO_SVE" in result["summary"]["skipped"][0]["reason"]


def test_a_wrong_lane_fails_validation(arith_arm):
    """A corrupted result (TAILSCOPE_TEST_CORRUPT=1: the first kernel's last store, an FP16 one here) is
    caught by the replay: exit 4, Failed Validation."""
    rc, recs = run_arith(arith_arm, "max", env={"TAILSCOPE_TEST_CORRUPT": "1"})
    assert rc == 4
    failed = [r for r in recs if r["record"] == "validation" and not r["passed"]]
    assert failed and "fp16_scalar_add_lat" in failed[0]["message"]


def _disassemble(exe: Path, function: str) -> list[str]:
    nm = subprocess.run(["aarch64-linux-gnu-nm", "-S", "--defined-only", str(exe)], capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3] == function:
            start, size = int(parts[0], 16), int(parts[1], 16)
            break
    else:
        pytest.fail(f"{function} is not a symbol of {exe}")
    dump = subprocess.run(
        ["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
         f"--stop-address={start + size:#x}", str(exe)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [m.group(1).strip() for m in re.finditer(r"^\s*[0-9a-f]+:\s+(.*)$", dump, re.M)]


def test_clock_chain_is_a_dependent_register_add_chain(arith_arm):
    """ts_clock_chain: many `add xD, xA, xB` with xD one of the sources (each waits for the last), the addend
    a register (no immediate: a renamer could fold those), all on one destination."""
    code = _disassemble(arith_arm, "ts_clock_chain")
    adds = [re.match(r"add\s+(x\d+),\s*(x\d+),\s*(\S+)$", t) for t in code if t.startswith("add")]
    chain = [m for m in adds if m and m.group(1) in (m.group(2), m.group(3))]
    dest = Counter(m.group(1) for m in chain).most_common(1)[0][0]  # the chain's register (the other: i++)
    on_it = [m for m in chain if m.group(1) == dest]
    assert len(on_it) >= 64, code
    assert all(m.group(3).startswith("x") for m in on_it), "an immediate addend on the chain"


@pytest.mark.parametrize(
    ("kernel", "pattern"),
    [
        ("fp64_neon_fma", r"^fmla\s+(v\d+)\.2d"),
        ("fp32_neon_sub", r"^fsub\s+(v\d+)\.4s"),
        ("fp16_neon_div", r"^fdiv\s+(v\d+)\.8h"),
        ("fp16_scalar_sqrt", r"^fsqrt\s+(h\d+)"),
        ("fp16_scalar_fma", r"^fmadd\s+(h\d+)"),
        ("fp64_scalar_sub", r"^fsub\s+(d\d+)"),
        ("fp64_sve_fma", r"^fm(?:ad|la)\s+(z\d+)\.d"),
        ("fp16_sve_sqrt", r"^fsqrt\s+(z\d+)\.h"),
    ],
)
def test_kernels_are_the_instructions_they_name(arith_arm, kernel, pattern):
    """Each kernel is its operation at its width, not a library call or a folded constant: lat writes one
    register (one chain, 8 operations per loop step), thr twelve (the chains stay apart)."""
    for kind, chains in (("lat", 1), ("thr", 12)):
        code = _disassemble(arith_arm, f"arith_{kernel}_{kind}")
        dests = [m.group(1) for t in code if (m := re.search(pattern, t))]
        assert len(dests) >= 8 and len(set(dests)) == chains, (kind, code)
        assert not any(re.match(r"bl\s", t) for t in code), "a call in the kernel"


_OP_INSN = {"add": r"fadd", "sub": r"fsub", "mul": r"fmul", "div": r"fdivr?", "fma": r"fm(?:la|ad|add)",
            "sqrt": r"fsqrt"}  # fmt: skip


def test_every_kernel_loop_is_its_operation_and_nothing_else(arith_arm):
    """All 108 kernels: the loop body holds only the kernel's operation (no register copy, no SIMD packing
    of a scalar flavour, no other FP instruction) besides the loop counter, on 1 (lat) or 12 (thr) chains.
    Before: the scalar throughput kernels ran six 2-lane fsub.2d (GCC packed the twelve C scalars) and NEON
    FMA copied its addend (mov v3.16b, v1.16b) before every fmla."""
    nm = subprocess.run(["aarch64-linux-gnu-nm", "--defined-only", str(arith_arm)], capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    kernels = sorted({m.group(0) for m in re.finditer(r"arith_fp\w+_(?:lat|thr)\b", nm)})
    assert len(kernels) == 3 * 3 * 6 * 2, kernels
    for kernel in kernels:
        flavour, op, kind = re.match(r"arith_(fp\d+_\w+)_(\w+)_(lat|thr)$", kernel).groups()  # type: ignore[union-attr]
        reg = {"scalar": r"[hsd]\d+", "neon": r"v\d+\.\d+[hsd]", "sve": r"z\d+\.[hsd]"}[flavour.split("_")[1]]
        loop = _loop_of(arith_arm, kernel)
        fp = [t for t in loop if not re.match(r"(add|subs?|cmp|b\.\w+|cbnz|nop)\s", t + " ")]
        insn = rf"^{_OP_INSN[op]}\s+({reg})"
        assert all(re.match(insn, t) for t in fp), (kernel, loop)
        dests = {re.match(insn, t).group(1) for t in fp}  # type: ignore[union-attr]
        assert len(fp) >= (8 if kind == "lat" else 12) and len(dests) == (1 if kind == "lat" else 12), (
            kernel,
            loop,
        )


def _loop_of(exe: Path, function: str) -> list[str]:
    """The instructions of the function's (largest) loop: from a backward branch's target to the branch."""
    nm = subprocess.run(["aarch64-linux-gnu-nm", "-S", "--defined-only", str(exe)], capture_output=True,
                        text=True, check=True).stdout  # fmt: skip
    start, size = next((int(p[0], 16), int(p[1], 16)) for line in nm.splitlines()
                       if len(p := line.split()) == 4 and p[3] == function)  # fmt: skip
    dump = subprocess.run(
        ["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", f"--start-address={start:#x}",
         f"--stop-address={start + size:#x}", str(exe)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    lines = re.finditer(r"^\s*([0-9a-f]+):\s+(.*)$", dump, re.M)
    code = [(int(m.group(1), 16), m.group(2).strip()) for m in lines]
    loops = []
    for addr, text in code:
        m = re.match(r"b(?:\.\w+)?\s+([0-9a-f]+)\b", text)
        if m and int(m.group(1), 16) < addr:
            loops.append([t for a, t in code if int(m.group(1), 16) <= a <= addr])
    assert loops, f"no loop in {function}"
    return max(loops, key=len)


@pytest.mark.parametrize("name", ARM_HOSTS)
def test_kernel_set_of_each_recorded_arm_cpu(arith_arm, host_root, name):
    """`arith --check-args` with TAILSCOPE_CPUINFO: the flavours arith would run on each recorded Arm CPU
    (Kunpeng 920, Grace, A64FX), derived from its Features: FP16 (scalar, NEON and, with SVE, SVE) where it
    lists fphp and asimdhp, SVE where it lists sve; nothing runs (the emulated CPU is only the host)."""
    host = host_root(name)
    features = set(cpu_flags(host))
    env = {"TAILSCOPE_CPUINFO": str(host.path("/proc/cpuinfo"))}
    rc, recs = run_arith(arith_arm, "max", "--check-args", env=env)
    assert rc == 0, recs
    params = _one(recs, "config")["params"]
    sve = "sve" in features
    widths = {"scalar", "neon"} | ({"sve"} if sve else set())
    precisions = {"fp32", "fp64"} | ({"fp16"} if {"fphp", "asimdhp"} <= features else set())
    flavours = {tuple(k.split("_")[:2]) for k in params["kernels"]}
    assert flavours == {(p, w) for p in precisions for w in widths}
    assert {k.split("_")[2] for k in params["kernels"]} == set(OPS)
    assert params["kernel_isa"] == ("sve" if sve else "neon")

