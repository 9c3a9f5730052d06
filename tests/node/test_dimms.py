"""DIMM facts from recorded dmidecode type 17 and EDAC sysfs (untested on hardware here: this VM has neither),
and the fleet comparison that names the node with a 1-rank DIMM among 2-rank peers and the slower one."""

from __future__ import annotations

from pathlib import Path

from tailscope.node.dimms import collect, parse_dmidecode, read_edac, summary
from tailscope.node.fleet import fleet_findings

FIXTURES = Path(__file__).parent / "fixtures"
DMI = FIXTURES / "dmidecode"


def facts(name: str, microcode: str = "0xd0003a5") -> dict:
    from dataclasses import asdict

    return {"dimms": [asdict(d) for d in parse_dmidecode((DMI / name).read_text())], "microcode": microcode}


def test_dmidecode_type_17():
    dimms = parse_dmidecode((DMI / "node-2rank-2933.txt").read_text())
    assert len(dimms) == 5
    a1 = dimms[0]
    assert (a1.locator, a1.bank_locator, a1.populated) == ("CPU1_DIMM_A1", "NODE 1", True)
    assert (a1.size_bytes, a1.type, a1.speed_mts, a1.configured_speed_mts, a1.rank) == (
        32 << 30,
        "DDR4",
        2933,
        2933,
        2,
    )
    assert (a1.part_number, a1.manufacturer) == ("M393A4K40CB2-CVF", "Samsung")
    empty = dimms[4]
    assert not empty.populated and empty.rank is None and empty.part_number is None
    s = summary([d.__dict__ for d in dimms])
    assert s == {
        "populated": 4,
        "empty_slots": 1,
        "total_bytes": 128 << 30,
        "ranks": [2],
        "mixed_ranks": False,
        "min_configured_speed_mts": 2933,
        "types": ["DDR4"],
        "part_numbers": ["M393A4K40CB2-CVF"],
    }


def test_older_dmidecode_spelling():
    new = parse_dmidecode((DMI / "node-2rank-2933.txt").read_text())
    old = parse_dmidecode((DMI / "node-old-dmidecode.txt").read_text())
    assert [(d.size_bytes, d.configured_speed_mts, d.speed_mts) for d in old] == [
        (d.size_bytes, d.configured_speed_mts, d.speed_mts) for d in new
    ]


def test_edac_ranks_grouped_by_label():
    dimms = {d.locator: d for d in read_edac(FIXTURES / "edac" / "mc")}
    chan0 = dimms["CPU_SrcID#0_Ha#0_Chan#0_DIMM#0"]
    assert (chan0.rank, chan0.size_bytes, chan0.type, chan0.ce_count, chan0.ue_count) == (
        2,
        16 << 30,
        "Registered-DDR4",
        3,
        0,
    )
    modern = dimms["CPU_SrcID#1_MC#0_Chan#0_DIMM#0"]
    assert (modern.rank, modern.size_bytes, modern.ue_count) == (None, 16 << 30, 1)
    assert read_edac(FIXTURES / "absent") == []


def test_fleet_names_the_mixed_rank_node_and_the_slow_one():
    fleet = {f"n{i}": facts("node-2rank-2933.txt") for i in range(1, 5)}
    fleet["n5"] = facts("node-one-1rank.txt")
    fleet["n6"] = facts("node-2666.txt")
    fleet["n7"] = facts("node-2rank-2933.txt", microcode="0xd0003b9")
    found = {(f.node, f.field) for f in fleet_findings(fleet)}
    assert found == {
        ("n5", "ranks"),  # 1-rank among 2-rank on one node
        ("n5", "total_bytes"),  # 16 GB instead of 32 GB in that slot
        ("n6", "min_configured_speed_mts"),
        ("n7", "microcode"),
    }
    by = {(f.node, f.field): f for f in fleet_findings(fleet)}
    assert by[("n6", "min_configured_speed_mts")].value == 2666
    assert by[("n6", "min_configured_speed_mts")].majority == 2933
    assert "1 and 2 ranks mixed" in by[("n5", "ranks")].message
    assert all(f.cause == "hardware-config" for f in by.values())


def test_a_tie_flags_nothing():
    fleet = {
        "a": facts("node-2rank-2933.txt"),
        "b": facts("node-2rank-2933.txt"),
        "c": facts("node-2666.txt"),
        "d": facts("node-2666.txt"),
    }
    assert [f for f in fleet_findings(fleet) if f.field == "min_configured_speed_mts"] == []


def test_this_vm_says_why_it_has_no_dimms():
    got = collect()
    if got["dimms"]:
        assert got["dimms_source"] in ("dmidecode -t 17", "edac sysfs")
    else:
        assert got["dimms_source"] is None and "EDAC" in got["dimms_unreadable"]


def test_fleet_ignores_dimm_records_of_an_older_format():
    """Campaigns collected before node/dimms.py stored dmidecode's raw fields under "dimms": compared on
    their other facts, never a KeyError."""
    old = {"dimms": [{"Size": "32 GB", "Locator": "A1", "Rank": "2"}], "microcode": "0x1"}
    fleet = {"a": old, "b": old, "c": {**old, "microcode": "0x2"}}
    assert [(f.node, f.field) for f in fleet_findings(fleet)] == [("c", "microcode")]


def test_memtotal_compared_to_the_gib():
    """MemTotal differs by a few MiB between identical nodes (firmware reservations): not a finding; a node
    with 16 GiB less is."""
    gib = 1 << 30
    fleet = {n: {"memory_bytes": 256 * gib - k * (3 << 20)} for k, n in enumerate("abcd")}
    assert fleet_findings(fleet) == []
    fleet["e"] = {"memory_bytes": 240 * gib}
    (finding,) = fleet_findings(fleet)
    assert (finding.node, finding.field, finding.majority) == ("e", "memory_bytes", 256 * gib)


def test_two_node_types_are_compared_within_their_cpu_model():
    intel = {"cpu_model_name": "Xeon Gold 6248", "microcode": "0x5003006", "bios_version": "2.1"}
    amd = {"cpu_model_name": "EPYC 7763", "microcode": "0xa001173", "bios_version": "M10"}
    fleet = {f"i{k}": intel for k in range(4)} | {f"a{k}": amd for k in range(3)}
    found = [(f.node, f.field) for f in fleet_findings(fleet)]
    assert found == [("a0", "cpu_model_name"), ("a1", "cpu_model_name"), ("a2", "cpu_model_name")]
    fleet["i3"] = {**intel, "microcode": "0x5003302"}  # the odd one among its own kind
    (odd,) = [f for f in fleet_findings(fleet) if f.field == "microcode"]
    assert (
        odd.node == "i3" and odd.majority == "0x5003006" and "3 of 4 nodes with the same CPU" in odd.message
    )
