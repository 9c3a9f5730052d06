"""Node facts: what a node is and how it is set up, read from /proc and sysfs (no root needed).

Each reading is a small function; a file that is absent or unreadable gives None, never an exception, so the
same code runs on a laptop, in a VM and on a cluster node. The knobs that matter for variability (governor,
turbo, THP, huge pages, ...) are described in `knobs.py`, which also gives advice. The file readers they
share are in `read.py` (facts imports knobs and hugepages, never the other way round).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from tailscope.node.host import THIS, Host
from tailscope.node.read import SYS_CPU, cpuinfo_block, parse_cpu_list, parse_size, read_int, read_text

SYS_NODE = Path("/sys/devices/system/node")
# the CPU flags that decide what the probes run and which part this is (x86 `flags`; aarch64 in node/arm.py)
ISA_FLAGS = ("fma", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_fp16", "sve", "asimd")


def node_name() -> str:
    """$SLURMD_NODENAME inside Slurm jobs (emulated nodes share a host), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def cpu_flags(host: Host = THIS) -> list[str]:
    """The first processor's flags (x86) or Features (aarch64), as /proc/cpuinfo lists them."""
    first = cpuinfo_block(host.text("/proc/cpuinfo") or "")
    return (first.get("flags") or first.get("Features") or "").split()


def cpuinfo(host: Host = THIS) -> dict[str, Any]:
    first = cpuinfo_block(host.text("/proc/cpuinfo") or "")

    def as_int(key: str) -> int | None:
        try:
            return int(first[key], 0)
        except (KeyError, ValueError):
            return None

    flags = first.get("flags", "").split()
    return {
        "cpu_vendor": first.get("vendor_id"),
        "cpu_model_name": first.get("model name"),
        "cpu_family": as_int("cpu family"),
        "cpu_model": as_int("model"),
        "cpu_stepping": as_int("stepping"),
        "microcode": first.get("microcode"),
        "hypervisor_flag": "hypervisor" in flags,
        "isa": [f for f in ISA_FLAGS if f in flags],
    }


def topology(host: Host = THIS) -> dict[str, Any]:
    sys_cpu = host.path(SYS_CPU)
    online = parse_cpu_list(read_text(sys_cpu / "online"))
    packages: set[int] = set()
    cores: set[tuple[int, int]] = set()
    for cpu in online:
        base = sys_cpu / f"cpu{cpu}" / "topology"
        pkg = read_int(base / "physical_package_id")
        core = read_int(base / "core_id")
        if pkg is not None:
            packages.add(pkg)
            cores.add((pkg, core if core is not None else cpu))
    numa = sorted(p.name for p in host.path(SYS_NODE).glob("node[0-9]*"))
    return {
        "sockets": len(packages) or None,
        "cores": len(cores) or None,
        "threads": len(online) or None,
        "numa_nodes": len(numa) or None,
        "online_cpus": read_text(sys_cpu / "online"),
        "isolated_cpus": read_text(sys_cpu / "isolated") or "",
        "nohz_full": read_text(sys_cpu / "nohz_full") or "",
        "smt_active": read_int(sys_cpu / "smt" / "active"),
    }


def caches(cpu: int = 0, host: Host = THIS) -> list[dict[str, Any]]:
    out = []
    for index in sorted((host.path(SYS_CPU) / f"cpu{cpu}" / "cache").glob("index*")):
        out.append(
            {
                "level": read_int(index / "level"),
                "type": read_text(index / "type"),
                "size_bytes": parse_size(read_text(index / "size")),
                "ways": read_int(index / "ways_of_associativity"),
                "line_bytes": read_int(index / "coherency_line_size"),
                "sets": read_int(index / "number_of_sets"),
                "shared_cpu_list": read_text(index / "shared_cpu_list"),
            }
        )
    return out


def cache_size(level: int, kinds: tuple[str, ...] = ("Data", "Unified"), host: Host = THIS) -> int | None:
    for c in caches(0, host):
        if c["level"] == level and c["type"] in kinds:
            return c["size_bytes"]
    return None


def memory(host: Host = THIS) -> dict[str, Any]:
    meminfo: dict[str, int] = {}
    for line in (host.text("/proc/meminfo") or "").splitlines():
        key, _, value = line.partition(":")
        size = parse_size(value.replace(" kB", "K"))
        if size is not None:
            meminfo[key] = size
    per_node = {}
    for node in sorted(host.path(SYS_NODE).glob("node[0-9]*")):
        match = re.search(r"MemTotal:\s+(\d+) kB", read_text(node / "meminfo") or "")
        if match:
            per_node[node.name] = int(match.group(1)) * 1024
    return {"memory_bytes": meminfo.get("MemTotal"), "memory_per_numa_node": per_node, "dimms": dimms()}


def dimms() -> list[dict[str, str]] | None:
    """DIMM population from `dmidecode -t 17` (needs root and the dmidecode package; None otherwise)."""
    exe = shutil.which("dmidecode")
    if exe is None or os.geteuid() != 0:
        return None
    try:
        text = subprocess.run(
            [exe, "-t", "17"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = []
    for block in text.split("\n\n"):
        if "Memory Device" not in block:
            continue
        fields = dict(
            (k.strip(), v.strip())
            for k, _, v in (line.partition(":") for line in block.splitlines())
            if v
            and k.strip()
            in {
                "Size",
                "Locator",
                "Speed",
                "Configured Memory Speed",
                "Rank",
                "Type",
                "Part Number",
                "Manufacturer",
            }
        )
        if fields:
            found.append(fields)
    return found


def firmware_and_cpufreq(host: Host = THIS) -> dict[str, Any]:
    """BIOS vendor/version/date (SMBIOS via /sys/class/dmi/id, world-readable) and the cpufreq driver and
    maximum frequency of CPU 0; None where the kernel exposes none (a VM without SMBIOS, no cpufreq driver).
    Compared across nodes by node/fleet.py."""
    dmi = host.path("/sys/class/dmi/id")
    cpufreq = host.path(SYS_CPU / "cpu0" / "cpufreq")
    return {
        "bios_vendor": read_text(dmi / "bios_vendor"),
        "bios_version": read_text(dmi / "bios_version"),
        "bios_date": read_text(dmi / "bios_date"),
        "cpufreq_driver": read_text(cpufreq / "scaling_driver"),
        "cpufreq_max_khz": read_int(cpufreq / "cpuinfo_max_freq"),
    }


def virtualization(host: Host = THIS) -> str:
    """`none`, or the hypervisor as the firmware/kernel name it (kvm, vmware, xen, microsoft, ...)."""
    hv = host.text("/sys/hypervisor/type")
    if hv:
        return hv
    vendor = " ".join(
        filter(None, (host.text("/sys/class/dmi/id/sys_vendor"), host.text("/sys/class/dmi/id/product_name")))
    ).lower()
    for needle, name in (
        ("kvm", "kvm"),
        ("qemu", "qemu"),
        ("vmware", "vmware"),
        ("virtualbox", "virtualbox"),
        ("microsoft", "microsoft"),
        ("xen", "xen"),
        ("amazon ec2", "kvm"),
    ):
        if needle in vendor:
            return name
    if cpuinfo(host)["hypervisor_flag"]:
        return "unknown-hypervisor"
    return "none"


def os_release() -> str | None:
    text = read_text("/etc/os-release") or ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    return match.group(1) if match else None


def core_pmu(host: Host = THIS) -> str | None:
    """The core PMU the kernel registered (x86 `cpu` or hybrid `cpu_core`, Arm `armv8_pmuv3*`), or None: no
    hardware counters (most virtual machines)."""
    devices = host.path("/sys/bus/event_source/devices")
    names = sorted(d.name for d in devices.iterdir()) if devices.is_dir() else []
    core = [n for n in names if n in ("cpu", "cpu_core") or n.startswith(("armv8_pmuv3", "armv9_"))]
    return core[0] if core else None


def cpu_facts(host: Host = THIS) -> dict[str, Any]:
    """What the CPU of `host` is (this node, or a recorded one: node/host.py): identity, ISA flags, the
    aarch64 part, topology, caches, cpufreq and firmware, virtualization, and the part it is (read from the
    model, or inferred where a hypervisor masks it: part_facts)."""
    from tailscope.node import arm  # aarch64 parts; qemu-user emulation anywhere

    facts: dict[str, Any] = cpuinfo(host)
    facts.update(arm.collect(host))
    facts.update(topology(host))
    facts["l1d_bytes"] = cache_size(1, ("Data",), host)
    facts["l2_bytes"] = cache_size(2, host=host)
    facts["l3_bytes"] = cache_size(3, host=host)
    facts["caches"] = caches(0, host)
    facts["virtualization"] = virtualization(host)
    facts["core_pmu"] = core_pmu(host)
    facts.update(firmware_and_cpufreq(host))
    facts.update(part_facts(facts, cpu_flags(host)))
    return facts


def part_facts(facts: dict[str, Any], flags: list[str]) -> dict[str, Any]:
    """cpu_part (the part's name; "likely ..." where inferred), cpu_part_id, cpu_part_table (the reference
    table `check --deep` judges against, only where the identification is unambiguous), cpu_part_inferred,
    cpu_part_basis, and cpu_part_note: "virtual machine: part inferred: ..." where the model was masked."""
    from tailscope.node.parts import identify

    who = identify(facts, flags)
    note = None
    if who.inferred:
        where = "virtual machine" if facts.get("virtualization") not in (None, "", "none") else "masked model"
        note = f"{where}: part inferred: {who.name or 'no part tailscope knows fits'}, from {who.basis}"
    return {
        "cpu_part": who.name,
        "cpu_part_id": who.part.id if who.part else None,
        "cpu_part_table": who.table,
        "cpu_part_inferred": who.inferred,
        "cpu_part_basis": who.basis,
        "cpu_part_note": note,
    }


def collect() -> dict[str, Any]:
    """Every fact, as a flat-ish dict; the keys that are also `nodes` columns come first."""
    from tailscope.node import build, dimms, hugepages  # build limits; pools; DIMMs
    from tailscope.node.knobs import KNOBS

    facts: dict[str, Any] = {"node": node_name(), "hostname": socket.gethostname()}
    facts.update(cpu_facts())
    facts.update(memory())
    facts["kernel"] = platform.release()
    facts["os"] = os_release()
    facts["boot_cmdline"] = read_text("/proc/cmdline")
    for knob in KNOBS:
        facts[knob.name] = knob.read()
    facts.update(hugepages.collect())  # the mitigation advice's facts
    facts.update(dimms.collect())  # dmidecode type 17 (root) or EDAC sysfs; says why when neither
    facts.update(build.limits())  # optional libraries missing at build time, what running without root costs
    return facts


NODE_COLUMNS = (
    "cpu_vendor",
    "cpu_model_name",
    "cpu_family",
    "cpu_model",
    "cpu_stepping",
    "microcode",
    "sockets",
    "cores",
    "threads",
    "numa_nodes",
    "l1d_bytes",
    "l2_bytes",
    "l3_bytes",
    "memory_bytes",
    "kernel",
    "os",
    "thp_enabled",
    "thp_defrag",
    "hugepages_2m",
    "hugepages_1g",
    "governor",
    "turbo",
    "virtualization",
)


def nodes_row(facts: dict[str, Any], *, collected_at: Any, task: str) -> dict[str, Any]:
    """One row of the `nodes` table from collected facts."""
    row = {name: facts.get(name) for name in NODE_COLUMNS}
    row.update(
        node=facts["node"],
        collected_at=collected_at,
        task=task,
        facts=json.dumps(facts, sort_keys=True, default=str),
    )
    return row
