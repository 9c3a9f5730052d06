"""`tailscope facts`: this node's facts and tuning advice."""

from __future__ import annotations

import argparse
from typing import Any

from tailscope.errors import EXIT_OK

# the flags that decide which kernels the probes run and which part a CPU is (`facts --host`)
DECIDING_FLAGS = ("avx2", "fma", "avx512", "amx", "sve", "fphp", "asimdhp")


def host_lines(found: dict[str, Any], flags: list[str], kernel: str, machine: str) -> list[str]:
    """What a test run on this host depends on, in a few lines: the CPU and its part (read, or inferred
    under a hypervisor), the flags that decide the kernels, the kernel, virtual machine or not, the PMU."""
    from tailscope.counters.eventsets import for_node

    g = found.get
    cpu = g("cpu_model_name") or "unknown CPU"
    ident = f"{g('cpu_vendor')} family {g('cpu_family')} model {g('cpu_model')} stepping {g('cpu_stepping')}"
    deciding = " ".join(f for f in flags if f.startswith(DECIDING_FLAGS)) or "none"
    missing = [p for p in ("avx512", "amx", "sve") if not any(f.startswith(p) for f in flags)]
    absent = ", ".join(f"no {p}*" for p in missing)
    virt = g("virtualization")
    vm = "no" if virt in (None, "", "none") else f"yes ({virt})"
    caches = (("L1d", g("l1d_bytes")), ("L2", g("l2_bytes")), ("L3", g("l3_bytes")))
    sizes = ", ".join(f"{k} {v >> 20} MiB" if v >= 1 << 20 else f"{k} {v >> 10} KiB" for k, v in caches if v)
    shape = f"{g('sockets')} socket(s), {g('cores')} cores, {g('numa_nodes')} NUMA node(s)"
    lines = [
        f"host: cpu: {cpu} ({ident}): {g('cpu_part') or 'not a part tailscope knows'}",
        f"host: flags that matter: {deciding}" + (f" ({absent})" if absent else ""),
        f"host: kernel: {kernel} {machine}; virtual machine: {vm}; core PMU: {g('core_pmu') or 'none'}; "
        f"event set: {for_node(found)[0]}",
        f"host: {g('threads')} CPUs ({shape}); {sizes or 'no cache sizes'}",
    ]
    if g("cpu_part_note"):
        lines.append(f"host: {g('cpu_part_note')}")
    return lines


def facts(args: argparse.Namespace) -> int:
    from tailscope.counters.eventsets import for_node
    from tailscope.node.build import limit_lines
    from tailscope.node.facts import NODE_COLUMNS, collect
    from tailscope.node.hugepages import advice_lines
    from tailscope.node.knobs import advice

    if getattr(args, "host", False):
        from tailscope.node.facts import cpu_facts, cpu_flags
        from tailscope.node.host import THIS

        print("\n".join(host_lines(cpu_facts(), cpu_flags(), THIS.release, THIS.machine)))
        return EXIT_OK
    found = collect()
    if args.json:
        from tailscope.jsonout import write_json

        write_json(found, sort_keys=True)
        return EXIT_OK
    for key in ("node", *NODE_COLUMNS):  # the columns of the nodes table, in its order
        print(f"{key:16s} {found.get(key)}")
    event_set, why = for_node(found)
    print(f"{'cpu_part':16s} {found.get('cpu_part') or 'not a part tailscope knows'}")
    print(f"{'event_set':16s} {event_set} ({why})")
    if found.get("cpu_part_note"):
        print(f"part: {found['cpu_part_note']}")
    for line in advice(found):
        print(f"advice: {line}")
    print("\n".join(advice_lines(found)))
    for line in limit_lines(found):
        print(f"limits: {line}")
    return EXIT_OK
