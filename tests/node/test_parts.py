"""Which part a CPU is (node/parts.py): read from its model, inferred where a hypervisor masks it, and only
unambiguous inferences name a reference table. The recorded real CPUs are in tests/hosts; these are the rules'
edges, with facts as node.facts writes them."""

from __future__ import annotations

import pytest

from tailscope.node.parts import BY_ID, MIB, Identity, identify, name_is_masked

KIB = 1 << 10
SPR_FLAGS = ["fma", "avx2", "avx512f", "avx512bw", "avx512vl", "avx512_vbmi2", "gfni", "avx512_bf16",
             "amx_tile", "avx512_fp16"]  # fmt: skip


def _facts(vendor: str, family: int, model: int, name: str, l1d: int, l2: int, l3: int) -> dict:
    return dict(cpu_vendor=vendor, cpu_family=family, cpu_model=model, cpu_model_name=name, l1d_bytes=l1d,
                l2_bytes=l2, l3_bytes=l3)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "masked"),
    [
        ("AMD EPYC", True),
        ("Intel(R) Xeon(R) Processor", True),
        ("AMD EPYC-Milan Processor", True),  # QEMU's named CPU models
        ("Intel Xeon Processor (Icelake)", True),
        ("Common KVM processor", True),
        ("Genuine Intel(R) CPU 0000%@", True),  # an engineering sample's name
        ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", False),
        ("Intel(R) Xeon(R) 6972P", False),
        ("AMD EPYC 9754 128-Core Processor", False),
        (None, True),
    ],
)
def test_a_masked_model_name_names_no_part(name, masked):
    assert name_is_masked(name) is masked


def test_amx_and_fp16_with_a_small_l3_are_three_parts_and_no_table():
    """Sapphire Rapids, Emerald Rapids and Granite Rapids all fit a 105 MiB L3 with AMX and AVX512-FP16:
    ambiguous; Granite Rapids has no published table, so no table is used."""
    who = identify(_facts("GenuineIntel", 6, 167, "Intel(R) Xeon(R) Processor", 48 * KIB, 2 * MIB, 105 * MIB),
                   SPR_FLAGS)  # fmt: skip
    assert who.part is None and who.inferred and who.table is None
    assert {p.id for p in who.candidates} == {"sapphire-rapids", "emerald-rapids", "granite-rapids"}
    assert who.name.startswith("likely one of Intel Xeon Scalable 4th gen")


def test_every_candidate_sharing_a_table_is_unambiguous_for_judging():
    both = Identity(None, True, "", (BY_ID["sapphire-rapids"], BY_ID["emerald-rapids"]))
    assert both.table == "sapphire-rapids"


def test_a_model_number_contradicted_by_its_flags_is_not_trusted():
    """Model 85 (Skylake-SP) never has AMX: the number is a hypervisor's, the part is inferred from the flags
    and a 320 MiB L3 (only Emerald and Granite Rapids ship one that large)."""
    facts = _facts("GenuineIntel", 6, 85, "Intel Xeon Processor (Skylake)", 48 * KIB, 2 * MIB, 320 * MIB)
    who = identify(facts, SPR_FLAGS)
    assert who.inferred and {p.id for p in who.candidates} == {"emerald-rapids", "granite-rapids"}
    assert "(Skylake-SP / Cascade Lake)) never has amx_tile, avx512_fp16, avx512_vbmi2, gfni" in who.basis


def test_a_masked_name_with_a_known_model_is_checked_against_its_flags_and_caches():
    """Family 25 model 1 is Zen 3; AVX-512 and a 1 MiB L2 are not: the flags and caches decide (Zen 4); with
    Zen 3's flags but the 1 MiB L2 no part fits, which is said, not guessed."""
    zen4 = ["fma", "avx2", "vaes", "avx512f", "avx512_bf16"]
    who = identify(_facts("AuthenticAMD", 25, 1, "AMD EPYC", 32 * KIB, 1 * MIB, 32 * MIB), zen4)
    assert who.part is BY_ID["zen4"] and who.inferred and "never has avx512f" in who.basis
    who = identify(_facts("AuthenticAMD", 25, 1, "AMD EPYC", 32 * KIB, 1 * MIB, 32 * MIB), ["avx2", "vaes"])
    assert who.part is None and who.candidates == () and who.name is None
    assert "never has L2 1 MiB" in who.basis


def test_an_unmasked_unknown_part_is_unknown_not_inferred():
    who = identify(_facts("GenuineIntel", 6, 165, "Intel(R) Core(TM) i9-10900F CPU @ 2.80GHz", 32 * KIB,
                          256 * KIB, 20 * MIB), ["avx2", "fma"])  # fmt: skip
    assert who.part is None and not who.inferred and who.name is None
    assert "no part tailscope knows" in who.basis


def test_arm_parts_are_read_from_midr():
    assert identify({"midr": "0x481fd010"}, []).part is BY_ID["kunpeng920"]
    assert identify({"midr": "0x410fd4f0"}, []).part is BY_ID["neoverse-v2"]
    who = identify({"midr": "0x410fd0c1"}, [])  # Neoverse N1: not in the catalogue
    assert who.part is None and not who.inferred
