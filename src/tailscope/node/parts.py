"""Which part a node's CPU is: from its vendor, family and model (aarch64: MIDR_EL1), or, where a hypervisor
masks them, inferred from what still shows (ISA flags, cache geometry).

A hypervisor may hide the model name ("AMD EPYC", "Intel(R) Xeon(R) Processor", QEMU's "Intel Xeon Processor
(Icelake)") and may report a model number of another part (family 6 model 167, a client part, with AMX and
AVX512-FP16 flags that part never had). Then the part is inferred from the facts a guest still sees:

- the ISA flags, which each generation adds to (`required`: every bare-metal part of the kind lists them;
  `excludes`: flags of later generations it never has);
- the cache geometry: L1d and L2 per core and the size of one L3 instance, within what the vendor shipped.

An inference names the part with the word "likely" and says what it rests on; it is unambiguous only where one
part fits (or every part that fits shares one reference table: `table`, the id in
analysis/reference_tables.toml). Where the name and model number are intact the part is read, not inferred.

Sources of the figures below (vendors' documents, public): Intel Xeon Scalable product briefs and ARK (cores,
L3 per socket: Skylake-SP 1.375 MiB/core, Ice Lake-SP 1.5 MiB/core, Sapphire Rapids 1.875 MiB/core up to
112.5 MiB, Emerald Rapids up to 320 MiB, Xeon 6 Granite Rapids up to 504 MiB), Intel Optimization Reference
Manual (L1d 32 KiB / 48 KiB, L2 1 MiB / 1.25 MiB / 2 MiB per core); AMD Software Optimization Guides for
families 17h, 19h, 1Ah and the EPYC product pages (L2 512 KiB Zen 2/3, 1 MiB Zen 4/5; L1d 48 KiB on Zen 5;
L3 per CCX); Linux arch/x86/include/asm/intel-family.h and AMD's PPRs for family/model numbers. The recorded
nodes in tests/hosts/ check every row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

KIB, MIB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Part:
    id: str
    name: str
    vendor: str  # /proc/cpuinfo vendor_id, or the Arm implementer code as "arm:0x48"
    family: int | None = None
    models: tuple[tuple[int, int], ...] = ()  # inclusive model-number ranges
    arm_part: int | None = None  # aarch64 MIDR part number
    table: str | None = None  # analysis/reference_tables.toml part id
    required: frozenset[str] = field(default_factory=frozenset)
    excludes: frozenset[str] = field(default_factory=frozenset)
    l1d: tuple[int, ...] = ()  # possible L1d sizes per core
    l2: tuple[int, ...] = ()  # possible L2 sizes per core
    l3: tuple[int, int] | None = None  # one L3 instance, smallest and largest shipped (bytes)

    def fits_caches(self, l1d: int | None, l2: int | None, l3: int | None) -> list[str]:
        """The cache figures that rule this part out (empty: they fit, or are not known)."""
        out = []
        if l1d and self.l1d and l1d not in self.l1d:
            out.append(f"L1d {_size(l1d)}")
        if l2 and self.l2 and l2 not in self.l2:
            out.append(f"L2 {_size(l2)}")
        if l3 and self.l3 and not self.l3[0] <= l3 <= self.l3[1]:
            out.append(f"L3 {_size(l3)}")
        return out


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


INTEL, AMD = "GenuineIntel", "AuthenticAMD"
_SPR_UP = _set("amx_tile avx512_fp16")
PARTS: tuple[Part, ...] = (
    Part("skylake-sp", "Intel Xeon Scalable 1st/2nd gen (Skylake-SP / Cascade Lake)", INTEL, 6, ((85, 85),),
         table="skylake-sp", required=_set("avx512f avx512bw avx512vl"),
         excludes=_set("avx512_vbmi2 gfni avx512ifma") | _SPR_UP, l1d=(32 * KIB,), l2=(1 * MIB,),
         l3=(8 * MIB, 39 * MIB)),
    Part("icelake-sp", "Intel Xeon Scalable 3rd gen (Ice Lake-SP)", INTEL, 6, ((106, 106), (108, 108)),
         required=_set("avx512f avx512_vbmi2 gfni"), excludes=_SPR_UP | _set("avx512_bf16"),
         l1d=(48 * KIB,), l2=(1280 * KIB,), l3=(12 * MIB, 60 * MIB)),
    Part("sapphire-rapids", "Intel Xeon Scalable 4th gen (Sapphire Rapids)", INTEL, 6, ((143, 143),),
         table="sapphire-rapids", required=_SPR_UP, excludes=_set("amx_fp16"), l1d=(48 * KIB,),
         l2=(2 * MIB,), l3=(15 * MIB, 113 * MIB)),
    Part("emerald-rapids", "Intel Xeon Scalable 5th gen (Emerald Rapids)", INTEL, 6, ((207, 207),),
         table="sapphire-rapids", required=_SPR_UP, excludes=_set("amx_fp16"), l1d=(48 * KIB,),
         l2=(2 * MIB,), l3=(15 * MIB, 320 * MIB)),
    Part("granite-rapids", "Intel Xeon 6 (Granite Rapids)", INTEL, 6, ((173, 174),), required=_SPR_UP,
         l1d=(48 * KIB,), l2=(2 * MIB,), l3=(48 * MIB, 504 * MIB)),
    Part("zen2", "AMD Zen 2 (EPYC 7002 Rome, Ryzen 3000)", AMD, 23, ((48, 63), (96, 127)),
         required=_set("avx2 sha_ni"), excludes=_set("vaes avx512f"), l1d=(32 * KIB,), l2=(512 * KIB,),
         l3=(4 * MIB, 16 * MIB)),
    Part("zen3", "AMD Zen 3 (EPYC 7003 Milan, Ryzen 5000)", AMD, 25, ((0, 15), (32, 95)),
         required=_set("avx2 vaes"), excludes=_set("avx512f"), l1d=(32 * KIB,), l2=(512 * KIB,),
         l3=(16 * MIB, 96 * MIB)),
    Part("zen4", "AMD Zen 4 (EPYC 9004 Genoa/Bergamo/Siena, Ryzen 7000)", AMD, 25,
         ((16, 31), (96, 127), (160, 175)), table="zen4", required=_set("avx512f avx512_bf16"),
         excludes=_set("avx512_vp2intersect"), l1d=(32 * KIB,), l2=(1 * MIB,), l3=(16 * MIB, 96 * MIB)),
    Part("zen5", "AMD Zen 5 (EPYC 9005 Turin, Ryzen 9000 / AI 300)", AMD, 26, ((0, 255),), table="zen5",
         required=_set("avx512f avx512_vp2intersect"), l1d=(48 * KIB,), l2=(1 * MIB,),
         l3=(8 * MIB, 96 * MIB)),
    Part("kunpeng920", "HiSilicon Kunpeng 920 (TSV110)", "arm:0x48", arm_part=0xD01, table="kunpeng920"),
    Part("neoverse-v2", "Arm Neoverse V2 (NVIDIA Grace, AWS Graviton4, Google Axion)", "arm:0x41",
         arm_part=0xD4F),
    Part("a64fx", "Fujitsu A64FX", "arm:0x46", arm_part=0x001),
)
BY_ID = {p.id: p for p in PARTS}


@dataclass(frozen=True)
class Identity:
    """What a node's CPU is, and how that was found."""

    part: Part | None  # the part (None: not one this catalogue knows, or ambiguous)
    inferred: bool  # True: the model name or number is masked; the part comes from flags and caches
    basis: str  # what identified it, in words
    candidates: tuple[Part, ...] = ()  # every part that fits (more than one: ambiguous)

    @property
    def name(self) -> str | None:
        """'AMD Zen 3 (...)', 'likely Intel Xeon 6 (Granite Rapids)', 'likely one of ...', or None."""
        if self.part is not None:
            return f"likely {self.part.name}" if self.inferred else self.part.name
        if self.candidates:
            return "likely one of " + ", ".join(p.name for p in self.candidates)
        return None

    @property
    def table(self) -> str | None:
        """The reference table to judge against: only where the identification is unambiguous (every
        candidate shares it)."""
        tables = {p.table for p in (self.candidates or ((self.part,) if self.part else ()))}
        return next(iter(tables)) if len(tables) == 1 else None


# A model name that names no part: no model number in it (QEMU's "Intel Xeon Processor (Icelake)", a cloud's
# "Intel(R) Xeon(R) Processor", "AMD EPYC", "AMD EPYC-Milan Processor", "Common KVM processor")
_NUMBER = re.compile(r"\d{3,}")
_FREQ = re.compile(r"@\s*[0-9.]+\s*GHz", re.IGNORECASE)


def name_is_masked(model_name: str | None) -> bool:
    text = _FREQ.sub("", model_name or "")
    return not any(n.strip("0") for n in _NUMBER.findall(text))


def by_model(vendor: str | None, family: int | None, model: int | None) -> Part | None:
    """The x86 part of this vendor, family and model number, or None."""
    for p in PARTS:
        if p.vendor == vendor and p.family == family and model is not None and any(
            lo <= model <= hi for lo, hi in p.models
        ):
            return p
    return None


def by_midr(implementer: int | None, part: int | None) -> Part | None:
    """The aarch64 part of this MIDR implementer and part number, or None."""
    for p in PARTS:
        if implementer is not None and p.vendor == f"arm:0x{implementer:02x}" and p.arm_part == part:
            return p
    return None


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n // KIB} KiB"


def identify(facts: Mapping[str, Any], flags: Iterable[str]) -> Identity:
    """The part of a node from its facts (cpu_vendor, cpu_family, cpu_model, cpu_model_name, midr,
    l1d_bytes, l2_bytes, l3_bytes, virtualization) and its CPU flags (x86 `flags`, aarch64 `Features`)."""
    midr = facts.get("midr")
    if midr:  # aarch64: MIDR_EL1 shows under KVM as on bare metal; the part is read from it
        value = int(str(midr), 16)
        part = by_midr((value >> 24) & 0xFF, (value >> 4) & 0xFFF)
        return Identity(part, False, f"MIDR_EL1 {midr}")
    flags = set(flags)
    vendor, family, model = facts.get("cpu_vendor"), facts.get("cpu_family"), facts.get("cpu_model")
    name = facts.get("cpu_model_name")
    direct = by_model(vendor, family, model)
    contradicted = direct is not None and bool(direct.excludes & flags)
    masked = name_is_masked(name)
    if not masked and not contradicted:  # read, not inferred: the part this model is, or none known
        if direct is not None:
            return Identity(direct, False, f"{vendor} family {family} model {model} ({name})")
        known = f"{vendor} family {family} model {model} ({name}) is no part tailscope knows"
        return Identity(None, False, known)
    l1d, l2, l3 = facts.get("l1d_bytes"), facts.get("l2_bytes"), facts.get("l3_bytes")
    sizes = (("L1d", l1d), ("L2", l2), ("L3", l3))
    caches = ", ".join(f"{k} {_size(v)}" for k, v in sizes if v) or "no cache sizes"
    shown = f"the model name {name!r} names no part" if masked else f"the model name is {name!r}"
    misfit = direct.fits_caches(l1d, l2, l3) if direct is not None else []
    if direct is not None and not contradicted and not misfit:
        # the name is masked but family and model are a part's, and its caches fit that part
        return Identity(direct, True, f"family {family} model {model}, {caches}; {shown}")
    candidates = tuple(
        p for p in PARTS
        if p.vendor == vendor and p.required <= flags and not (p.excludes & flags)
        and not p.fits_caches(l1d, l2, l3)
    )
    marks = ", ".join(dict.fromkeys(f for p in candidates for f in sorted(p.required) if f in flags))
    if direct is None:
        why = f"family {family} model {model} is no part tailscope knows"
    else:
        never = sorted(direct.excludes & flags) if contradicted else misfit
        why = f"family {family} model {model} ({direct.name}) never has {', '.join(never)}"
    basis = f"{marks + ' flags, ' if marks else ''}{caches}; {why}; {shown}"
    if len(candidates) == 1:
        return Identity(candidates[0], True, basis, candidates)
    return Identity(None, True, basis, candidates)
