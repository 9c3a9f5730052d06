"""Which slice-hash model fits this node: processor (vendor, family, model) and the number of enabled CHAs.

The slice count is the number of uncore CHA PMUs the kernel exposes (`uncore_cha_<i>` in
/sys/bus/event_source/devices, one per enabled CHA of a socket; `uncore_cbox_<i>` on client parts),
not the core count: slices can outnumber cores (an 8-core Xeon Gold 6134 has 18 CHAs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tailscope.addr.errors import AddrInputError
from tailscope.addr.model import SliceHashModel
from tailscope.addr.tables import builtin_for, builtin_names
from tailscope.node.facts import cpuinfo, parse_cpu_list, read_int, read_text, topology

EVENT_SOURCE = Path("/sys/bus/event_source/devices")

# (vendor, family, model) -> the processor code of the table names (McCalpin's <proc>).
PROCESSORS: dict[tuple[str, int, int], str] = {
    ("GenuineIntel", 6, 0x55): "SKX",  # Skylake-SP, Cascade Lake-SP, Cooper Lake
    ("GenuineIntel", 6, 0x6A): "ICX",  # Ice Lake-SP
    ("GenuineIntel", 6, 0x6C): "ICX",  # Ice Lake-D
    ("GenuineIntel", 6, 0x8F): "SPR",  # Sapphire Rapids (and Xeon CPU Max)
    ("GenuineIntel", 6, 0x57): "KNL",  # Xeon Phi x200
}

_SLICE_PMU = re.compile(r"uncore_(cha|cbox)_(\d+)")


@dataclass(frozen=True)
class UncorePmu:
    """One uncore slice PMU as sysfs describes it (what perf_event_open needs to count on it)."""

    name: str
    index: int
    type: int
    cpumask: tuple[int, ...]  # one CPU per socket: where system-wide counting of this box happens
    formats: dict[str, str] = field(default_factory=dict)  # format/<field> -> "config:0-7", ...


def slice_pmus(root: Path = EVENT_SOURCE) -> list[UncorePmu]:
    """The CHA PMUs (or, on parts without CHAs, the CBo PMUs), in index order; [] when there are none."""
    found: dict[str, list[UncorePmu]] = {"cha": [], "cbox": []}
    try:
        entries = sorted(Path(root).iterdir())
    except OSError:
        return []
    for entry in entries:
        match = _SLICE_PMU.fullmatch(entry.name)
        if not match:
            continue
        pmu_type = read_int(entry / "type")
        if pmu_type is None:
            continue
        formats = {}
        if (entry / "format").is_dir():
            for f in sorted((entry / "format").iterdir()):
                formats[f.name] = read_text(f) or ""
        found[match.group(1)].append(
            UncorePmu(
                name=entry.name,
                index=int(match.group(2)),
                type=pmu_type,
                cpumask=tuple(parse_cpu_list(read_text(entry / "cpumask"))),
                formats=formats,
            )
        )
    pmus = found["cha"] or found["cbox"]
    return sorted(pmus, key=lambda p: p.index)


def event_sources(root: Path = EVENT_SOURCE) -> list[str]:
    try:
        return sorted(p.name for p in Path(root).iterdir())
    except OSError:
        return []


@dataclass(frozen=True)
class NodeSlices:
    """What detection saw: processor, CHA count, cores, and the model chosen (None when none fits)."""

    vendor: str | None
    family: int | None
    model: int | None
    processor: str | None  # table code (SKX, ICX, ...) or None for an unknown processor
    slices: int  # enabled CHAs per socket (0: no uncore PMUs visible)
    cores_per_socket: int | None
    slice_model: SliceHashModel | None
    reason: str  # one line: why this model, or why none

    @property
    def cpu(self) -> str:
        if self.family is None or self.model is None:
            return self.vendor or "unknown CPU"
        return f"{self.vendor} family {self.family} model 0x{self.model:x}"


def identify(
    vendor: str | None,
    family: int | None,
    model: int | None,
    slices: int,
    cores_per_socket: int | None = None,
) -> NodeSlices:
    """The built-in model for this processor and CHA count, with the reason (pure: no sysfs access)."""
    processor = PROCESSORS.get((vendor or "", family or -1, model or -1))
    cpu = (
        f"{vendor} family {family} model 0x{model:x}" if family is not None and model is not None else vendor
    )
    chosen = None
    if slices == 0:
        reason = (
            f"no uncore CHA PMUs in {EVENT_SOURCE} (a VM, a non-Intel CPU, or a kernel without uncore "
            "support), so the slice count is unknown; name a model with --model or give its tables"
        )
    elif vendor != "GenuineIntel":
        reason = f"{cpu}: only Intel's CHA slice hashes are modelled (tables and measurement are Intel's)"
    elif processor is None:
        reason = (
            f"{cpu} is not a processor with published slice-hash tables; measure one with "
            "`tailscope addr measure` and `tailscope addr infer`, then pass --base-sequence and --masks"
        )
    else:
        chosen = builtin_for(processor, slices)
        known = [n for n in builtin_names() if n.startswith(f"{processor}_")]
        if chosen is None:
            reason = (
                f"{processor} with {slices} CHAs has no built-in model (built-in for {processor}: "
                f"{', '.join(known) or 'none'}); measure it with `tailscope addr measure` and "
                "`tailscope addr infer`"
            )
        else:
            more = ""
            if cores_per_socket is not None and slices > cores_per_socket:
                more = (
                    f"; {slices} slices on {cores_per_socket} cores per socket (slices can outnumber cores)"
                )
            reason = f"{cpu} is {processor}, {slices} uncore_cha PMUs: model {chosen.name}{more}"
    return NodeSlices(vendor, family, model, processor, slices, cores_per_socket, chosen, reason)


def detect(root: Path = EVENT_SOURCE) -> NodeSlices:
    """Identify this node's model from /proc/cpuinfo, its topology and the uncore PMUs in sysfs."""
    info = cpuinfo()
    topo = topology()
    sockets = topo.get("sockets") or 1
    cores = topo.get("cores")
    per_socket = cores // sockets if isinstance(cores, int) and sockets else None
    return identify(
        info.get("cpu_vendor"),
        info.get("cpu_family"),
        info.get("cpu_model"),
        len(slice_pmus(root)),
        per_socket,
    )


def detected_model(root: Path = EVENT_SOURCE) -> SliceHashModel:
    """This node's model, or AddrInputError saying why there is none and what to do instead."""
    found = detect(root)
    if found.slice_model is None:
        raise AddrInputError(f"cannot choose a slice-hash model for this node: {found.reason}")
    return found.slice_model
