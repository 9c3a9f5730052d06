"""aarch64 node facts: the part from MIDR_EL1, the SVE vector length, and qemu-user emulation.

MIDR_EL1 (Arm ARM D17.2.100) names the core: implementer [31:24], variant [23:20], architecture [19:16],
part number [15:4], revision [3:0]. Linux exposes it per CPU as
/sys/devices/system/cpu/cpuN/regs/identification/midr_el1 ("0x00000000481fd010") and in /proc/cpuinfo as
"CPU implementer", "CPU variant", "CPU part", "CPU revision". The part table below is from the vendors'
technical reference manuals (Arm Neoverse/Cortex TRMs: "MIDR_EL1, Main ID Register"; HiSilicon TSV110 as
Linux's arch/arm64/include/asm/cputype.h names it: HISI_CPU_PART_TSV110 0xD01; Fujitsu A64FX 0x001). A core
shared by several chips (Neoverse V2: NVIDIA Grace, AWS Graviton4, Google Axion) is named by the core, with
the chip where the firmware says which (SMBIOS vendor and product, the SoC's JEP106 id in /sys/devices/soc0).

Under qemu-user (`qemu-aarch64-static`, binfmt_misc) an aarch64 process sees the host's /proc and /sys: the
CPU in /proc/cpuinfo is an x86 one. `emulation()` says so ("emulated aarch64 on <host CPU>"), and the verdict
of such a node is inconclusive: its timings are the emulator's.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from tailscope.node.host import THIS, Host
from tailscope.node.read import cpuinfo_block

IMPLEMENTERS = {
    0x41: "Arm",
    0x42: "Broadcom",
    0x43: "Cavium",
    0x46: "Fujitsu",
    0x48: "HiSilicon",
    0x4E: "NVIDIA",
    0x50: "Applied Micro",
    0x51: "Qualcomm",
    0x61: "Apple",
    0xC0: "Ampere",
}
# (implementer, part number) -> (core name, the chip where the core means exactly one)
PARTS: dict[tuple[int, int], tuple[str, str | None]] = {
    (0x41, 0xD03): ("Cortex-A53", None),
    (0x41, 0xD05): ("Cortex-A55", None),
    (0x41, 0xD07): ("Cortex-A57", None),
    (0x41, 0xD08): ("Cortex-A72", None),
    (0x41, 0xD0B): ("Cortex-A76", None),
    (0x41, 0xD0C): ("Neoverse N1", None),  # Graviton2, Ampere Altra
    (0x41, 0xD40): ("Neoverse V1", None),  # Graviton3
    (0x41, 0xD49): ("Neoverse N2", None),
    (0x41, 0xD4F): ("Neoverse V2", None),  # NVIDIA Grace, AWS Graviton4, Google Axion
    (0x41, 0xD84): ("Neoverse V3", None),
    (0x41, 0xD8E): ("Neoverse N3", None),
    (0x43, 0x0AF): ("ThunderX2", "ThunderX2"),
    (0x46, 0x001): ("A64FX", "A64FX"),
    (0x48, 0xD01): ("TSV110", "Kunpeng 920"),
    (0x4E, 0x004): ("Carmel", None),
    (0xC0, 0xAC3): ("Ampere-1", "AmpereOne"),
    (0xC0, 0xAC4): ("Ampere-1a", "AmpereOne"),
}
# Chips by what the firmware says (SMBIOS sys_vendor/product_name, /sys/devices/soc0 soc_id), per core.
CHIPS: dict[str, tuple[tuple[str, str], ...]] = {
    "Neoverse V2": (
        ("nvidia", "Grace"), ("jep106:036b", "Grace"), ("amazon", "Graviton4"), ("google", "Axion"),
    ),
    "Neoverse V1": (("amazon", "Graviton3"),),
    "Neoverse N1": (("amazon", "Graviton2"), ("ampere", "Altra")),
}


def decode_midr(midr: int) -> dict[str, int]:
    return {
        "implementer": (midr >> 24) & 0xFF,
        "variant": (midr >> 20) & 0xF,
        "architecture": (midr >> 16) & 0xF,
        "part": (midr >> 4) & 0xFFF,
        "revision": midr & 0xF,
    }


def part_name(midr: int, firmware: str = "") -> str:
    """'HiSilicon TSV110 (Kunpeng 920)', 'Neoverse V2 (Grace)', 'Fujitsu A64FX', or the raw codes."""
    f = decode_midr(midr)
    vendor = IMPLEMENTERS.get(f["implementer"], f"implementer 0x{f['implementer']:02x}")
    known = PARTS.get((f["implementer"], f["part"]))
    if known is None:
        return f"{vendor} part 0x{f['part']:03x} r{f['variant']}p{f['revision']}"
    core, chip = known
    if chip is None:
        text = firmware.lower()
        chip = next((name for needle, name in CHIPS.get(core, ()) if needle in text), None)
    named = core if vendor == "Arm" or core.startswith(vendor) else f"{vendor} {core}"
    if chip and chip != core:
        return f"{named} ({chip})"
    return named


def read_midr(sys_cpu: Path = Path("/sys/devices/system/cpu"), cpuinfo: str | None = None) -> int | None:
    """MIDR_EL1 of CPU 0: sysfs where the kernel exposes it, else rebuilt from /proc/cpuinfo's fields."""
    try:
        return int((sys_cpu / "cpu0" / "regs" / "identification" / "midr_el1").read_text().strip(), 16)
    except (OSError, ValueError):
        pass
    fields = cpuinfo_block(cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo"))
    try:
        # the kernel prints "CPU architecture: 8" for every Armv8+ core; its MIDR field holds 0xF ("by CPUID")
        return (
            int(fields["CPU implementer"], 0) << 24
            | int(fields["CPU variant"], 0) << 20
            | 0xF << 16
            | int(fields["CPU part"], 0) << 4
            | int(fields["CPU revision"], 0)
        )
    except (KeyError, ValueError):
        return None


def sve_vector_bits(path: Path = Path("/proc/sys/abi/sve_default_vector_length")) -> int | None:
    """The SVE vector length a new process gets (the kernel's default, in bytes there), in bits."""
    try:
        return int(path.read_text().strip()) * 8
    except (OSError, ValueError):
        return None


def emulation(machine: str | None = None, cpuinfo: str | None = None) -> str | None:
    """'emulated aarch64 on <host CPU>' where this aarch64 process runs under qemu-user on another
    architecture (its /proc/cpuinfo describes the host), else None."""
    machine = machine or platform.machine()
    if machine not in ("aarch64", "arm64"):
        return None
    fields = cpuinfo_block(cpuinfo if cpuinfo is not None else _read("/proc/cpuinfo"))
    if "vendor_id" in fields or "flags" in fields:  # an x86 host's cpuinfo
        return f"emulated aarch64 on {fields.get('model name') or fields.get('vendor_id') or 'another CPU'}"
    return None


def collect(host: Host = THIS) -> dict[str, Any]:
    """The aarch64 facts of `host` (empty on other machines, except the emulation fact, which is always
    there): this node, or a recorded one (node/host.py)."""
    machine = host.machine
    text = host.text("/proc/cpuinfo") or ""
    facts: dict[str, Any] = {"emulation": emulation(machine, text)}
    if machine not in ("aarch64", "arm64") or facts["emulation"]:
        return facts
    midr = read_midr(host.path("/sys/devices/system/cpu"), text)
    fields = cpuinfo_block(text)
    firmware = " ".join(
        host.text(path) or ""
        for path in (
            "/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name", "/sys/devices/soc0/soc_id",
            "/sys/devices/soc0/family",
        )
    )
    features = fields.get("Features", "").split()
    if midr is not None:
        f = decode_midr(midr)
        facts.update(
            midr=f"0x{midr:08x}",
            cpu_vendor=IMPLEMENTERS.get(f["implementer"], f"0x{f['implementer']:02x}"),
            cpu_model_name=part_name(midr, firmware),
            cpu_family=f["architecture"],
            cpu_model=f["part"],
            cpu_stepping=f["variant"] << 4 | f["revision"],
        )
    facts["isa"] = [name for name in ("asimd", "asimdhp", "fphp", "sve", "sve2", "sme") if name in features]
    vl = host.path("/proc/sys/abi/sve_default_vector_length")
    facts["sve_vector_bits"] = sve_vector_bits(vl) if "sve" in features else None
    return facts


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""
