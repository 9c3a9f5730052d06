"""aarch64 node facts from recorded Kunpeng 920, Grace and A64FX registers, qemu-user detection (issue 27)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.node import arm
from tailscope.node.host import Host

FIXTURES = Path(__file__).parent / "fixtures" / "arm"


@pytest.mark.parametrize(
    ("midr", "firmware", "name"),
    [
        (0x481FD010, "", "HiSilicon TSV110 (Kunpeng 920)"),
        (0x410FD4F0, "NVIDIA Grace CPU Superchip", "Neoverse V2 (Grace)"),
        (0x410FD4F0, "jep106:036b:0241", "Neoverse V2 (Grace)"),
        (0x410FD4F0, "Amazon EC2 c8g.metal-24xl", "Neoverse V2 (Graviton4)"),
        (0x410FD4F0, "", "Neoverse V2"),
        (0x461F0010, "", "Fujitsu A64FX"),
        (0x411FD401, "Amazon EC2 c7g.16xlarge", "Neoverse V1 (Graviton3)"),
        (0x48AFD990, "", "HiSilicon part 0xd99 r10p0"),
    ],
)
def test_the_part_is_named_from_midr(midr, firmware, name):
    assert arm.part_name(midr, firmware) == name


def test_midr_fields():
    assert arm.decode_midr(0x481FD010) == {
        "implementer": 0x48, "variant": 1, "architecture": 0xF, "part": 0xD01, "revision": 0}


def test_midr_from_sysfs_before_cpuinfo(tmp_path):
    regs = tmp_path / "cpu0" / "regs" / "identification"
    regs.mkdir(parents=True)
    (regs / "midr_el1").write_text("0x00000000410fd4f0\n")
    assert arm.read_midr(tmp_path, cpuinfo=(FIXTURES / "kp920-cpuinfo.txt").read_text()) == 0x410FD4F0


def _cpuinfo_only(tmp_path, name: str) -> Host:
    """A host whose only file is /proc/cpuinfo (no sysfs MIDR: the fields of cpuinfo are read instead)."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text((FIXTURES / name).read_text())
    return Host(tmp_path, machine_name="aarch64")


def test_kunpeng_920_facts_from_cpuinfo(tmp_path):
    facts = arm.collect(_cpuinfo_only(tmp_path, "kp920-cpuinfo.txt"))
    assert facts["emulation"] is None
    assert facts["cpu_model_name"] == "HiSilicon TSV110 (Kunpeng 920)"
    assert facts["cpu_vendor"] == "HiSilicon" and facts["cpu_model"] == 0xD01
    assert facts["midr"] == "0x481fd010"  # "CPU architecture: 8" is MIDR field 0xF
    assert "fphp" in facts["isa"] and "sve" not in facts["isa"]
    assert facts["sve_vector_bits"] is None


def test_grace_has_sve(tmp_path):
    facts = arm.collect(_cpuinfo_only(tmp_path, "grace-cpuinfo.txt"))
    assert facts["cpu_model_name"].startswith("Neoverse V2")
    assert {"sve", "sve2"} <= set(facts["isa"])


def test_qemu_user_is_seen_from_the_hosts_cpuinfo():
    host = (FIXTURES / "x86-host-cpuinfo.txt").read_text()
    assert arm.emulation("aarch64", host) == (
        "emulated aarch64 on Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz")
    assert arm.emulation("x86_64", host) is None  # a native x86 process is not emulated
    assert arm.emulation("aarch64", (FIXTURES / "kp920-cpuinfo.txt").read_text()) is None


def test_check_sizes_the_probes_for_an_emulated_node_with_quick():
    from tailscope.verbs.check import EMULATED_SIZES, check_variants

    variants = check_variants(quick=True, trials=2, common={}, emulated=True)
    emulated = {v.probe: v.params for v, _ in variants}
    assert emulated["dgemm"] == {"n": 256, "calls": 3} and emulated["stream"]["max_bytes"] == "8m"
    variants = check_variants(quick=True, trials=2, common={"page_policy": "4k"}, emulated=True)
    given = {v.probe: v.params for v, _ in variants}
    assert given["fwq"] == {**EMULATED_SIZES["fwq"], "page_policy": "4k"}  # the command line's options stay
    native = check_variants(quick=True, trials=2, common={}, emulated=False)
    assert all(not v.params for v, _ in native)  # a native node keeps the probes' own sizes
    full = check_variants(quick=False, trials=2, common={}, emulated=True)
    assert all(not v.params for v, _ in full)  # sized only when asked (--quick)
