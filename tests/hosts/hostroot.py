"""Recorded real CPUs (tests/hosts/*.toml) laid out as host roots the node facts read (node/host.py).

Each TOML file records one real node from a public source named in its [[source]] tables: the first
processor's /proc/cpuinfo block (vendor, family, model, stepping, model name, flags; aarch64: Features and the
MIDR fields) as `[cpuinfo] text`, and the sysfs facts in a compact form:

    [topology]  packages, cores_per_package, threads_per_core, numbering (how Linux numbers the CPUs:
                "package-major": cpu = thread x P x C + package x C + core, the kernel's usual order;
                "interleaved": cpu = thread x P x C + core x P + package), numa / cluster (a grouping, below),
                recorded_numa (the source's NUMA CPU lists, which the numbering must reproduce)
    [[cache]]   level, type, size, ways, line, shared: "core" (one core's threads), "group:N" (N consecutive
                cores of a package), "package"; cores = "0-3" where a cache covers only some of a package's
                cores (hybrid parts)
    [cpufreq]   driver, min_khz, max_khz, base_khz where the source has them
    [files]     other files by their absolute path (DMI, SoC id, SVE vector length, hypervisor type)

`materialize` writes them in the kernel's formats under a directory (proc/cpuinfo, sys/devices/system/cpu/
cpuN/{topology,cache,cpufreq,regs}, sys/devices/system/node/nodeK/cpulist, host.toml with uname's machine and
release), which `tailscope.node.host.recorded` opens like a node's root. A value the source does not give is
not written (the readers then say "unknown", as on a node whose kernel does not expose it).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tailscope.node.read import cpu_ranges, parse_cpu_list

HOSTS = Path(__file__).parent
NAMES = tuple(sorted(p.stem for p in HOSTS.glob("*.toml")))


@dataclass(frozen=True)
class Recorded:
    name: str
    doc: dict[str, Any]

    @property
    def expect(self) -> dict[str, Any]:
        """What the source says the node is (its part by model name or MIDR), independent of the code."""
        return self.doc["expect"]

    @property
    def cpuinfo(self) -> str:
        return self.doc["cpuinfo"]["text"]

    @property
    def midr(self) -> str | None:
        """aarch64: MIDR_EL1 as sysfs writes it (regs/identification/midr_el1)."""
        return self.doc["cpuinfo"].get("midr")


@cache
def load(name: str) -> Recorded:
    return Recorded(name, tomllib.loads((HOSTS / f"{name}.toml").read_text()))


def _groups(spec: str, cores: int) -> list[list[int]]:
    """'core' -> one group per core; 'group:N' -> N consecutive cores; 'package' -> all cores."""
    if spec == "package":
        return [list(range(cores))]
    if spec == "core":
        return [[c] for c in range(cores)]
    size = int(spec.removeprefix("group:"))
    return [list(range(s, min(s + size, cores))) for s in range(0, cores, size)]


_MADE: set[str] = set()


def _write(path: Path, text: str) -> None:
    parent = str(path.parent)
    if parent not in _MADE:
        os.makedirs(parent, exist_ok=True)
        _MADE.add(parent)
    with open(path, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def cpu_numbers(rec: Recorded) -> dict[tuple[int, int, int], int]:
    """(package, core, thread) -> Linux CPU number, by the recorded numbering."""
    t = rec.doc["topology"]
    packages, cores, threads = t["packages"], t["cores_per_package"], t.get("threads_per_core", 1)
    out = {}
    for p in range(packages):
        for c in range(cores):
            for th in range(threads):
                within = c * packages + p if t["numbering"] == "interleaved" else p * cores + c
                out[p, c, th] = th * packages * cores + within
    return out


def materialize(name: str, dest: Path) -> Path:
    """Write the recorded host `name` under `dest` (created) and return it."""
    rec = load(name)
    t = rec.doc["topology"]
    packages, cores = t["packages"], t["cores_per_package"]
    number = cpu_numbers(rec)
    cpus_of_core = {(p, c): sorted(n for (pp, cc, _), n in number.items() if (pp, cc) == (p, c))
                    for p in range(packages) for c in range(cores)}
    allcpus = sorted(number.values())
    host = rec.doc.get("host", {})
    _write(dest / "host.toml", "[host]\n" + "".join(
        f'{k} = "{host[k]}"\n' for k in ("machine", "release") if k in host))
    _write(dest / "proc/cpuinfo", rec.cpuinfo.rstrip("\n") + "\n\n")
    sysc = dest / "sys/devices/system/cpu"
    for f in ("online", "possible", "present"):
        _write(sysc / f, cpu_ranges(allcpus))
    _write(sysc / "smt/active", "1" if t.get("threads_per_core", 1) > 1 else "0")

    def cpus_of(p: int, group: list[int]) -> list[int]:
        return sorted(n for c in group for n in cpus_of_core[p, c])

    numa: list[list[int]] = []
    if t.get("numa"):
        numa = [cpus_of(p, g) for p in range(packages) for g in _groups(t["numa"], cores)]
        for k, cpus in enumerate(numa):
            _write(dest / f"sys/devices/system/node/node{k}/cpulist", cpu_ranges(cpus))
    clusters = {}
    if t.get("cluster"):
        for p in range(packages):
            for k, g in enumerate(_groups(t["cluster"], cores)):
                for c in g:
                    clusters[p, c] = (p * 1000 + k, cpus_of(p, g))
    midr = rec.midr
    for (p, c, _th), n in number.items():
        base = sysc / f"cpu{n}"
        top = base / "topology"
        core_cpus = cpu_ranges(cpus_of_core[p, c])
        _write(top / "physical_package_id", str(p))
        _write(top / "core_id", str(c))
        _write(top / "core_cpus_list", core_cpus)
        _write(top / "thread_siblings_list", core_cpus)
        _write(top / "package_cpus_list", cpu_ranges(cpus_of(p, list(range(cores)))))
        if (p, c) in clusters:
            _write(top / "cluster_id", str(clusters[p, c][0]))
            _write(top / "cluster_cpus_list", cpu_ranges(clusters[p, c][1]))
        if midr:
            _write(base / "regs/identification/midr_el1", f"0x{int(midr, 16):016x}")
        for k, ca in enumerate(rec.doc.get("cache", [])):
            restrict = parse_cpu_list(ca["cores"]) if "cores" in ca else list(range(cores))
            if c not in restrict:
                continue
            group = next(g for g in _groups(ca["shared"], len(restrict)) if restrict.index(c) in g)
            shared = cpus_of(p, [restrict[i] for i in group])
            index = base / f"cache/index{ca.get('index', k)}"
            _write(index / "level", str(ca["level"]))
            _write(index / "type", ca["type"])
            _write(index / "size", ca["size"])
            _write(index / "coherency_line_size", str(ca["line"]))
            if "ways" in ca:
                size = int(ca["size"].rstrip("K")) * 1024
                _write(index / "ways_of_associativity", str(ca["ways"]))
                _write(index / "number_of_sets", str(size // (ca["ways"] * ca["line"])))
            _write(index / "shared_cpu_list", cpu_ranges(shared))
        freq = rec.doc.get("cpufreq")
        if freq:
            for key, file in (("driver", "scaling_driver"), ("min_khz", "cpuinfo_min_freq"),
                              ("max_khz", "cpuinfo_max_freq"), ("base_khz", "base_frequency")):
                if key in freq:
                    _write(base / "cpufreq" / file, str(freq[key]))
    for path, text in rec.doc.get("files", {}).items():
        _write(dest / path.lstrip("/"), str(text))
    return dest


def generated_numa(rec: Recorded, root: Path) -> list[str]:
    """The NUMA CPU lists the materialized host has, in node order."""
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"), key=lambda d: int(d.name[4:]))
    return [(d / "cpulist").read_text().strip() for d in nodes]
