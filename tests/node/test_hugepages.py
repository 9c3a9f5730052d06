"""Pages and mitigation: huge-page pools read from sysfs (per NUMA node), the advice built from a node's
facts, its rendering in the report and in the check, and the VM statement about guest-physical addresses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from store_tools import stored
from tailscope.node import facts as node_facts
from tailscope.node.hugepages import (
    GIB,
    advice_lines,
    boot_hugepage_parameters,
    mitigation,
    pools_from_facts,
    pools_text,
    read_pools,
    vm_statement,
)
from tailscope.report.pages_section import pages_section, virtual_nodes

MIB2 = 2 << 20


def fake_sysfs(root: Path, pools: dict[tuple[int | None, int], tuple[int, int]]) -> Path:
    """(numa node or None, page kB) -> (nr_hugepages, free_hugepages) under a fake /sys."""
    for (node, kb), (total, free) in pools.items():
        base = (
            root / "kernel/mm/hugepages"
            if node is None
            else root / f"devices/system/node/node{node}/hugepages"
        )
        d = base / f"hugepages-{kb}kB"
        d.mkdir(parents=True)
        (d / "nr_hugepages").write_text(f"{total}\n")
        (d / "free_hugepages").write_text(f"{free}\n")
        (d / "surplus_hugepages").write_text("0\n")
    (root / "devices/system/node/node10").mkdir(parents=True, exist_ok=True)  # a node without hugepages/
    return root


def test_pools_are_read_per_numa_node(tmp_path):
    sys_root = fake_sysfs(
        tmp_path,
        {
            (None, 2048): (96, 90),
            (None, 1048576): (4, 3),
            (0, 2048): (64, 60),
            (1, 2048): (32, 30),
            (0, 1048576): (2, 1),
            (1, 1048576): (2, 2),
        },
    )
    pools = read_pools(sys_root)
    assert [(p.numa_node, p.page_bytes, p.total, p.free) for p in pools] == [
        (None, MIB2, 96, 90),
        (None, GIB, 4, 3),
        (0, MIB2, 64, 60),
        (0, GIB, 2, 1),
        (1, MIB2, 32, 30),
        (1, GIB, 2, 2),
    ]
    assert pools_text(pools) == (
        "2 MiB: 90 free of 96 reserved (node0 60/64, node1 30/32); "
        "1 GiB: 3 free of 4 reserved (node0 1/2, node1 2/2)"
    )
    assert read_pools(tmp_path / "absent") == []
    assert "no huge-page pools visible" in pools_text([])


def test_this_nodes_pools_agree_with_meminfo():
    """The machine-wide pool of the default size, read from sysfs, is what /proc/meminfo reports."""
    meminfo = Path("/proc/meminfo").read_text()
    size = int(re.search(r"Hugepagesize:\s+(\d+) kB", meminfo).group(1)) * 1024
    total = int(re.search(r"HugePages_Total:\s+(\d+)", meminfo).group(1))
    free = int(re.search(r"HugePages_Free:\s+(\d+)", meminfo).group(1))
    facts = node_facts.collect()
    (pool,) = [p for p in pools_from_facts(facts) if p.page_bytes == size and p.numa_node is None]
    assert (pool.total, pool.free) == (total, free)
    json.dumps(facts, default=str)  # stays serialisable for the nodes table


def facts_of(**kw):
    base = {
        "node": "n1",
        "thp_enabled": "madvise",
        "thp_defrag": "madvise",
        "virtualization": "none",
        "glibc": "2.36",
        "boot_cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda1",
        "hugepage_pools": [
            {"page_bytes": MIB2, "numa_node": None, "total": 0, "free": 0, "surplus": 0},
            {"page_bytes": GIB, "numa_node": None, "total": 0, "free": 0, "surplus": 0},
            {"page_bytes": GIB, "numa_node": 0, "total": 0, "free": 0, "surplus": 0},
        ],
    }
    base.update(kw)
    return base


def by_topic(facts):
    return {a.topic: a for a in mitigation(facts)}


def test_advice_follows_the_facts():
    plain = by_topic(facts_of())
    assert "virtual machine" not in plain
    assert (
        "madvise" in plain["status"].text
        and "1 GiB: 0 free of 0 reserved (node0 0/0)" in plain["status"].text
    )
    reserve = plain["reserve 1 GiB pages"]
    assert reserve.text.startswith("No free 1 GiB pages now.")
    assert "echo 2 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages" in reserve.commands
    assert any(
        "/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages" in c
        for c in reserve.commands
    )
    assert any("default_hugepagesz=1G hugepagesz=1G hugepages=" in c for c in reserve.commands)
    assert any(
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages" in c
        for c in plain["reserve 2 MiB pages"].commands
    )
    # glibc >= 2.34 has no morecore hook: the tunable, not hugectl, is the working recipe
    binaries = plain["unmodified binaries"]
    assert "glibc 2.36" in binaries.text and "does nothing here" in binaries.text
    assert any(c.startswith("GLIBC_TUNABLES=glibc.malloc.hugetlb=1073741824") for c in binaries.commands)
    assert any("hugectl --heap" in c for c in binaries.commands)
    assert any("LD_PRELOAD=libhugetlbfs.so HUGETLB_MORECORE=yes" in c for c in binaries.commands)
    old = by_topic(facts_of(glibc="2.31"))["unmodified binaries"]
    assert "does nothing here" not in old.text and "glibc >= 2.34" in old.text
    sweep = plain["1 GiB offset sweep"]
    # one command: every offset is a variant, run interleaved, then judged by `compare`
    assert "tailscope run l2sum --page 1g --offset 0m,16m,32m," in sweep.commands[0]
    assert ",240m --trials" in sweep.commands[0]
    assert sweep.commands[1] == "tailscope compare sweep-1g --by offset"
    # state-dependent words
    ready = facts_of(
        hugepage_pools=[{"page_bytes": GIB, "numa_node": None, "total": 4, "free": 3, "surplus": 0}],
        boot_cmdline="ro default_hugepagesz=1G hugepagesz=1G hugepages=4 quiet",
        thp_enabled="never",
    )
    topics = by_topic(ready)
    assert topics["reserve 1 GiB pages"].text.startswith("3 free 1 GiB page(s) now.")
    assert "default_hugepagesz=1G hugepagesz=1G hugepages=4" in topics["status"].text
    assert "THP is off" in topics["transparent huge pages"].text
    assert boot_hugepage_parameters("hugepages=0:2,1:2 x=1") == ["hugepages=0:2,1:2"]


def test_a_vm_gets_the_guest_physical_statement():
    topics = by_topic(facts_of(virtualization="kvm", node="vm1"))
    text = topics["virtual machine"].text
    assert "vm1" in text and "(kvm)" in text
    assert "guest-physical addresses do not determine host slices" in text and "only a model check" in text
    statement = vm_statement({"b": "kvm", "a": "xen"})
    assert statement.startswith("nodes a, b ran in a virtual machine (kvm, xen)")


def test_brief_lines_for_the_check():
    lines = advice_lines(facts_of(virtualization="kvm"), brief=True)
    assert lines[0].startswith("pages: status: transparent huge pages: madvise")
    assert any(line.startswith("pages: virtual machine:") for line in lines)
    assert any("tailscope run l2sum --page 1g --offset" in line for line in lines)
    assert "Pages and mitigation" in lines[-1]
    assert not any("GLIBC_TUNABLES" in line for line in lines)  # the full advice is in the report
    assert any("GLIBC_TUNABLES" in line for line in advice_lines(facts_of()))
    # no run pointed at page placement: the sweep's commands are left to the report, and the line says so
    quiet = advice_lines(facts_of(virtualization="kvm"), brief=True, sweep=False)
    assert not any("--offset" in line or "1 GiB offset sweep (" in line for line in quiet)
    assert "no flagged run pointed at page placement" in quiet[-1] and "Pages and mitigation" in quiet[-1]
    assert len(quiet) == len(lines) - 3  # the sweep's heading and its two commands


def nodes_frame(*rows: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "node": r["node"],
                "collected_at": pd.Timestamp("2026-11-23T10:00:00Z"),
                "virtualization": r.get("virtualization"),
                "facts": json.dumps(r),
            }
            for r in rows
        ]
    )


def test_report_section_tables_advice_and_vm_statement():
    html = pages_section(
        nodes_frame(facts_of(node="metal"), facts_of(node="guest<1>", virtualization="kvm", glibc="2.31"))
    )
    assert '<section id="pages"><h2>Pages and mitigation</h2>' in html
    assert "guest&lt;1&gt;" in html and "guest<1>" not in html  # escaped
    vm = re.search(r'<p class="notes" id="vm-addresses">(.*?)</p>', html).group(1)
    assert "guest&lt;1&gt;" in vm and "metal" not in vm
    assert "guest-physical addresses do not determine host slices" in vm and "only a model check" in vm
    assert html.count("<td>node0</td>") == 2  # the NUMA pool of each node
    assert "tailscope run l2sum --page 1g --offset 0m,16m" in html
    # advice that differs between the nodes is shown per node, the rest once
    assert "Unmodified binaries (node metal)" in html and "Unmodified binaries (node guest&lt;1&gt;)" in html
    assert html.count("<h3>Reserve 2 MiB pages</h3>") == 1
    bare = pages_section(nodes_frame(facts_of(node="metal")))
    assert "vm-addresses" not in bare and virtual_nodes(nodes_frame(facts_of(node="metal"))) == {}
    assert "No node facts" in pages_section(pd.DataFrame())


def test_report_of_a_campaign_run_here_has_the_section(tmp_path, capsys):
    """End to end: a real probe campaign on this node, its report (html.py's hook) and `tailscope facts`."""
    from tailscope.cli import main

    campaign = tmp_path / "c"
    assert (
        main(["run", "l2sum", "--trials", "2", "--sums", "20", "--no-pages", "--campaign", str(campaign)])
        == 0
    )
    assert main(["report", str(campaign), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "<h2>Pages and mitigation</h2>" in html
    here = node_facts.virtualization()
    assert ('id="vm-addresses"' in html) == (here != "none")
    capsys.readouterr()
    assert main(["facts"]) == 0
    out = capsys.readouterr().out
    assert "pages: status: transparent huge pages:" in out and "pages: 1 GiB offset sweep:" in out


@pytest.mark.root
def test_the_1g_offset_sweep_recipe_runs_here(tmp_path):
    """The advice's sweep, small: reserve one 1 GiB page at run time, two offsets, one trial each; the array
    is on one 1 GiB frame at the offset asked; the reservation is put back."""
    from tailscope.cli import main

    knob = Path("/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")
    if not knob.exists():
        pytest.skip("this kernel has no 1 GiB huge pages")
    before = int(knob.read_text())
    try:
        knob.write_text(f"{before + 1}\n")
        if int(knob.read_text()) < before + 1:
            pytest.skip("the kernel found no free 1 GiB of contiguous memory for a run-time reservation")
        campaign = tmp_path / "sweep"
        for offset in ("0m", "256m"):
            argv = ["run", "l2sum", "--page", "1g", "--offset", offset, "--trials", "1", "--sums", "20"]
            assert main([*argv, "--campaign", str(campaign)]) == 0
    finally:
        knob.write_text(f"{before}\n")
    assert int(knob.read_text()) == before
    rows = stored(
        campaign,
        "SELECT r.config, p.virtual_address, p.physical_address, p.page_size "
        "FROM runs r JOIN pages p USING (run_id) WHERE r.status = 'ok'",
    )
    offsets = sorted(json.loads(config)["offset"] for config, *_ in rows)
    assert offsets == [0, 256 << 20]
    for _, va, pa, size in rows:
        assert size == GIB and pa and pa % GIB == 0 and va % GIB == 0


@pytest.mark.slow
def test_the_check_prints_the_pages_status_and_the_sweep(tmp_path, capsys):
    from tailscope.cli import main

    argv = ["check", "--trials", "1", "--no-progress", "--campaign", str(tmp_path / "c")]
    main([*argv, "-o", str(tmp_path / "r.html")])
    out = capsys.readouterr().out
    pages = [line for line in out.splitlines() if line.startswith("pages: ")]
    assert pages[0].startswith("pages: status: transparent huge pages: ")
    words = " ".join(out.split())  # lines are wrapped at the terminal width
    # the sweep's commands where a flagged run's first cause is page-placement; else the report's
    assert main(["analyze", str(tmp_path / "c"), "--json"]) in (0, 1, 3)
    runs = json.loads(capsys.readouterr().out)["runs"]
    placement = any((r.get("causes") or [{}])[0].get("cause") == "page-placement" for r in runs)
    assert ("tailscope run l2sum --page 1g --offset 0m,16m" in words) == placement
    assert ("no flagged run pointed at page placement" in words) == (not placement)
    assert ("guest-physical addresses say nothing about host cache sets" in words) == (
        node_facts.virtualization() != "none"
    )
    assert "<h2>Pages and mitigation</h2>" in (tmp_path / "r.html").read_text()


def test_facts_without_pools_say_so():
    old = by_topic({"node": "n1", "thp_enabled": "madvise"})
    assert old["reserve 1 GiB pages"].text.startswith("The 1 GiB pool was not recorded.")
    assert "no huge-page pools visible" in old["status"].text


def test_every_tailscope_command_in_the_advice_parses():
    """Recipes users copy: each `tailscope ...` command in the advice is accepted by the real CLI parser."""
    import shlex

    from tailscope.cli import _probe_named, build_parser

    commands = [
        c for a in mitigation(facts_of(virtualization="kvm")) for c in a.commands for c in c.split(";")
    ]
    found = 0
    for command in commands:
        if "tailscope " not in command:
            continue
        argv = shlex.split(command[command.index("tailscope ") :].replace("$off", "64m"))[1:]
        build_parser(_probe_named(argv)).parse_args(argv)  # SystemExit(2) on a wrong recipe
        found += 1
    assert found >= 2, commands
