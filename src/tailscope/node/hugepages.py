"""Pages and mitigation: the node's THP mode and huge-page pools, and what to do about address-dependent
slow runs (seed 000 sections IV.D and VI, slides 001, seed 002). The one place for this advice: `check`,
`facts` and the report's "Pages and mitigation" section all render `mitigation(facts)`.

The seed's finding: on 2 MiB pages the high physical-address bits of a run's pages decide, through the L3
slice/snoop-filter hash, whether L2-resident data gets evicted; 1 GiB pages make the addresses of an
L2-sized array contiguous and the same in every run (DGEMM: slowest of 1271 runs 6.8% below the median,
against >= 25% on 2 MiB pages), and a sweep of the array's offset in a 1 GiB page shows which placements
conflict (24-core Xeon 8160: none in the first 32 MiB of a page, the pattern repeating every 256 MiB).

Measured on Debian 12 (glibc 2.36, kernel 6.1, KVM guest): reserving 1 GiB pages at run time through sysfs
worked; libhugetlbfs 2.23's heap backing (`hugectl --heap`, HUGETLB_MORECORE) no longer works with glibc
>= 2.34 (glibc removed the __morecore hook; Debian's NEWS for libhugetlbfs 2.23-5 says so), and
`GLIBC_TUNABLES=glibc.malloc.hugetlb=1073741824` put a 256 MiB malloc on a 1 GiB hugetlb page.
"""

from __future__ import annotations

import platform
import re
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tailscope.node.read import read_int

SYS = Path("/sys")
GIB = 1 << 30
MIB2 = 2 << 20
SWEEP_STEP = "16m"  # 16 offsets cover one 256 MiB period of the seed's pattern
SWEEP_OFFSETS = tuple(f"{16 * k}m" for k in range(16))


@dataclass(frozen=True)
class HugePagePool:
    """One pool of huge pages: the whole machine (numa_node None) or one NUMA node."""

    page_bytes: int
    numa_node: int | None
    total: int | None  # nr_hugepages: reserved in the pool
    free: int | None  # free_hugepages: not yet used by any mapping
    surplus: int | None

    @property
    def size_text(self) -> str:
        return "1 GiB" if self.page_bytes == GIB else f"{self.page_bytes >> 20} MiB"


def _pool(directory: Path, numa_node: int | None) -> HugePagePool | None:
    match = re.fullmatch(r"hugepages-(\d+)kB", directory.name)
    if not match:
        return None
    return HugePagePool(
        page_bytes=int(match.group(1)) * 1024,
        numa_node=numa_node,
        total=read_int(directory / "nr_hugepages"),
        free=read_int(directory / "free_hugepages"),
        surplus=read_int(directory / "surplus_hugepages"),
    )


def read_pools(sys_root: Path = SYS) -> list[HugePagePool]:
    """Every huge-page pool: machine-wide ones first, then per NUMA node, smaller pages first."""
    pools: list[HugePagePool] = []
    for d in sorted((sys_root / "kernel/mm/hugepages").glob("hugepages-*kB")):
        if (p := _pool(d, None)) is not None:
            pools.append(p)
    nodes = sorted(
        (sys_root / "devices/system/node").glob("node[0-9]*"), key=lambda d: int(d.name.removeprefix("node"))
    )
    for node_dir in nodes:
        for d in sorted((node_dir / "hugepages").glob("hugepages-*kB")):
            if (p := _pool(d, int(node_dir.name.removeprefix("node")))) is not None:
                pools.append(p)
    return sorted(pools, key=lambda p: (p.numa_node is not None, p.numa_node or 0, p.page_bytes))


def boot_hugepage_parameters(cmdline: str | None) -> list[str]:
    """The huge-page parameters of a kernel command line (hugepagesz=, hugepages=, default_hugepagesz=)."""
    return re.findall(r"(?:^|\s)((?:default_)?hugepages(?:z)?=\S+)", cmdline or "")


def collect(sys_root: Path = SYS) -> dict[str, Any]:
    """Facts for `node.facts.collect`: the pools, the glibc version and which huge-page tools exist."""
    libc, version = platform.libc_ver()
    return {
        "hugepage_pools": [asdict(p) for p in read_pools(sys_root)],
        "glibc": version if libc == "glibc" else None,
        "hugectl": shutil.which("hugectl"),
    }


def pools_from_facts(facts: Mapping[str, Any]) -> list[HugePagePool]:
    pools = []
    for row in facts.get("hugepage_pools") or ():
        try:
            pools.append(HugePagePool(**{k: row.get(k) for k in HugePagePool.__dataclass_fields__}))
        except (AttributeError, TypeError):
            continue
    return pools


def pools_text(pools: list[HugePagePool]) -> str:
    """`2 MiB: 0 of 0 free (node0 0/0); 1 GiB: ...` — the per-size totals and each NUMA node's free/total."""
    parts = []
    for size in sorted({p.page_bytes for p in pools}):
        whole = [p for p in pools if p.page_bytes == size and p.numa_node is None]
        per_node = [p for p in pools if p.page_bytes == size and p.numa_node is not None]
        head = whole[0] if whole else None
        text = f"{(head or per_node[0]).size_text}: "
        text += f"{_n(head.free)} free of {_n(head.total)} reserved" if head else "machine-wide pool unknown"
        if per_node:
            text += " (" + ", ".join(f"node{p.numa_node} {_n(p.free)}/{_n(p.total)}" for p in per_node) + ")"
        parts.append(text)
    return "; ".join(parts) if parts else "no huge-page pools visible (no /sys/kernel/mm/hugepages)"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


@dataclass(frozen=True)
class Advice:
    """One piece of advice: a topic, a sentence or two, and the commands that carry it out."""

    topic: str
    text: str
    commands: tuple[str, ...] = ()


def _free(pools: list[HugePagePool], size: int) -> int:
    whole = [p for p in pools if p.page_bytes == size and p.numa_node is None]
    return int(whole[0].free or 0) if whole else 0


def mitigation(facts: Mapping[str, Any], *, sweep_dir: str = "sweep-1g") -> list[Advice]:
    """The pages status of a node and what to do, from its facts (as `node.facts.collect` records them)."""
    pools = pools_from_facts(facts)
    thp = facts.get("thp_enabled")
    out = [
        Advice(
            "status",
            f"transparent huge pages: {thp or 'unknown'} (defrag {facts.get('thp_defrag') or 'unknown'}); "
            f"hugetlb pools: {pools_text(pools)}; boot parameters: "
            + (" ".join(boot_hugepage_parameters(facts.get("boot_cmdline"))) or "none"),
        )
    ]
    virt = facts.get("virtualization")
    if virt not in (None, "none", ""):
        out.append(vm_advice(str(virt), str(facts.get("node") or "this node")))
    if thp == "never":
        thp_text = "THP is off: --page thp gets 4 KiB pages, whose physical addresses are random per 4 KiB."
    elif thp == "always":
        thp_text = "THP is 'always': large anonymous mappings may get 2 MiB pages, unmodified programs too."
    else:
        thp_text = (
            "THP is 'madvise': only mappings that ask (MADV_HUGEPAGE; l2sum --page thp does) get 2 MiB pages."
        )
    out.append(
        Advice(
            "transparent huge pages",
            thp_text + " On 2 MiB pages the high address bits of each page are random per run: that is where "
            "the seed's rare slow runs come from; compare --page thp/2m with --page 1g.",
            ("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",),
        )
    )
    out.append(
        Advice(
            "reserve 2 MiB pages",
            "At run time, as root, machine-wide or per NUMA node; check nr_hugepages afterwards, the kernel "
            "reserves fewer when free memory is fragmented. Give them back by writing 0.",
            (
                "echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
                "echo 256 > /sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
                "grep -i huge /proc/meminfo",
            ),
        )
    )
    free_1g = _free(pools, GIB)
    out.append(
        Advice(
            "reserve 1 GiB pages",
            (
                "The 1 GiB pool was not recorded. "
                if not any(p.page_bytes == GIB for p in pools)
                else f"{free_1g} free 1 GiB page(s) now. "
                if free_1g
                else "No free 1 GiB pages now. "
            )
            + "At run time the kernel needs 1 GiB of contiguous free memory per page, which a node that has "
            "been up for a while rarely has (it worked on a freshly booted Debian 12 KVM guest); the "
            "reliable way is the kernel command line (e.g. GRUB_CMDLINE_LINUX, then reboot), where "
            "hugepages= may be given per NUMA node as 0:N,1:N on recent kernels.",
            (
                "echo 2 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages",
                "echo 1 > /sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages",
                "boot: default_hugepagesz=1G hugepagesz=1G hugepages=16",
            ),
        )
    )
    glibc = str(facts.get("glibc") or "")
    new_glibc = _version(glibc) >= (2, 34) if glibc else None
    out.append(
        Advice(
            "unmodified binaries",
            "libhugetlbfs backs malloc with huge pages without rebuilding the program (the seed's DGEMM: "
            "LD_PRELOAD of libhugetlbfs.so put MKL's buffers on 1 GiB pages and removed the slow runs). "
            + (
                f"This node has glibc {glibc}: since 2.34 glibc has no __morecore hook, so libhugetlbfs heap "
                "backing (hugectl --heap, HUGETLB_MORECORE) does nothing here; use the glibc tunable instead "
                "(its value is the page size in bytes; it covers large allocations that malloc maps)."
                if new_glibc
                else "On glibc >= 2.34 (Debian 12, RHEL 9) that no longer works; there use the glibc tunable "
                "(glibc >= 2.35) on the last line."
            ),
            (
                "apt-get install libhugetlbfs-bin libhugetlbfs0   # Debian; hugeadm --pool-list: the pools",
                "hugectl --heap ./app                                   # glibc < 2.34",
                "LD_PRELOAD=libhugetlbfs.so HUGETLB_MORECORE=yes ./app  # glibc < 2.34, default page size",
                "GLIBC_TUNABLES=glibc.malloc.hugetlb=1073741824 ./app   # glibc >= 2.35: 1 GiB pages",
            ),
        )
    )
    out.append(sweep_advice(facts, sweep_dir))
    return out


def vm_statement(virtual: Mapping[str, str]) -> str:
    """What recorded addresses mean on virtual machines (node -> hypervisor); the one wording, used by the
    report, `addr explain`, `addr map --campaign` and the advice."""
    names = sorted(virtual)
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    kinds = ", ".join(sorted(set(virtual.values())))
    return (
        f"node{'s' if len(names) > 1 else ''} {shown} ran in a virtual machine ({kinds}): the recorded "
        "physical addresses are guest-physical, and guest-physical addresses do not determine host slices "
        "or snoop-filter sets (the hypervisor maps guest frames to host frames of its choosing); slice and "
        "set analyses of these pages are only a model check, not a statement about the hardware"
    )


def vm_advice(virtualization: str, node: str = "this node") -> Advice:
    return Advice(
        "virtual machine",
        vm_statement({node: virtualization})
        + "; 1 GiB guest pages are contiguous on the host only if the host backs the guest with 1 GiB pages.",
    )


def sweep_advice(facts: Mapping[str, Any] | None = None, sweep_dir: str = "sweep-1g") -> Advice:
    """The 1 GiB offset sweep; the snoop-filter reading only on CPU families where seed 000 established it
    (node/vendor.py), never on others (an AMD node got Xeon 8160 advice: issue 14)."""
    from tailscope.node.vendor import cpu_name, snoop_filter_family

    offsets = ",".join(SWEEP_OFFSETS)
    family = snoop_filter_family(facts or {})
    if family:
        reading = (
            f"offsets whose runs are slower conflict in the snoop filter ({family}; the seed's 24-core "
            "Xeon 8160: none in the first 32 MiB, the pattern repeats every 256 MiB)"
        )
    else:
        reading = (
            "offsets whose runs are slower are placements that conflict in the caches (no address-to-cache "
            f"mapping is known for {cpu_name(facts or {})}, so this sweep is how to find out)"
        )
    return Advice(
        "1 GiB offset sweep",
        "The seed's test: put l2sum's L2-sized array on a 1 GiB page (contiguous physical addresses) and "
        f"shift its start in the page; {reading}. {len(SWEEP_OFFSETS)} "
        f"offsets {SWEEP_STEP} apart cover one period; each needs offset + array bytes within the page. "
        "Needs free 1 GiB pages (see above); every offset is one variant, run interleaved trial by trial, "
        "and `compare` judges each against offset 0 (slow-run rates, Fisher's exact test, median shift).",
        (
            f"tailscope run l2sum --page 1g --offset {offsets} --trials 10 --campaign {sweep_dir}",
            f"tailscope compare {sweep_dir} --by offset",
        ),
    )


def _version(text: str) -> tuple[int, ...]:
    parts = re.findall(r"\d+", text)
    return tuple(int(p) for p in parts[:2]) if parts else (0,)


BRIEF_TOPICS = ("status", "virtual machine", "1 GiB offset sweep")


def advice_lines(
    facts: Mapping[str, Any], *, brief: bool = False, sweep_dir: str = "sweep-1g", sweep: bool = True
) -> list[str]:
    """The advice as terminal lines: `pages: TOPIC: text` then the commands, indented. `brief` (the check's
    summary): the status, the VM statement and the sweep's commands, pointing to the report for the rest.
    `sweep` False (brief only): the sweep's commands are left to the report too: the check found no run
    that page placement explains (a busy or noisy node is rerun idle before pages are worth a test)."""
    lines = []
    for a in mitigation(facts, sweep_dir=sweep_dir):
        if brief and (a.topic not in BRIEF_TOPICS or (a.topic == "1 GiB offset sweep" and not sweep)):
            continue
        if brief and a.topic == "1 GiB offset sweep":
            lines.append(
                f"pages: {a.topic} (slower offsets are placements that conflict; needs 1 GiB pages):"
            )
        else:
            lines.append(f"pages: {a.topic}: {a.text}")
        lines.extend(f"    {c}" for c in a.commands)
    if brief:
        what = "reserving 2 MiB / 1 GiB pages and huge pages for unmodified binaries"
        if not sweep:
            what = f"no flagged run pointed at page placement; the 1 GiB offset sweep that tests it, {what}"
        lines.append(f"pages: {what}: see the report's 'Pages and mitigation' section (or tailscope facts)")
    return lines
