"""Raw encodings: every PERFEVTSEL value of the seeds decodes to the right fields, resolves against the SKX
sysfs fixture to perf syntax that the fixture's format/ files re-encode to the same bits, matches libpfm4's
encoding where libpfm4 knows the event, and perf stat accepts the strings for the PMUs this machine has."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from counter_tools import SHARED_DATA, SKX_SYSFS, tsevents

# notes/seed-formats.md: (PERFEVTSEL, name, PMU family)
SEED_ENCODINGS = [
    ("0x004200c0", "INST_RETIRED.KERNEL", "cpu"),
    ("0x004310b0", "OFFCORE_REQUESTS.L3_MISS_DEMAND_DATA_READ", "cpu"),
    ("0x004304d1", "MEM_LOAD_RETIRED.L3_HIT", "cpu"),
    ("0x004320d1", "MEM_LOAD_RETIRED.L3_MISS", "cpu"),
    ("0x054305a3", "CYCLE_ACTIVITY.STALLS_L2_MISS", "cpu"),
    ("0x064306a3", "CYCLE_ACTIVITY.STALLS_L3_MISS", "cpu"),
    ("0x00431ff1", "L2_LINES_IN.ALL", "cpu"),
    ("0x00433f24", "L2_RQSTS.MISS", "cpu"),
    ("0x00430151", "L1D.REPLACEMENT", "cpu"),
    ("0x0040013d", "SF_EVICTION.M_STATE", "uncore_cha"),
    ("0x0040023d", "SF_EVICTION.E_STATE", "uncore_cha"),
    ("0x0040043d", "SF_EVICTION.S_STATE", "uncore_cha"),
    ("0x0040073d", "SF_EVICTION.ALL", "uncore_cha"),
    ("0x00400334", "LLC_LOOKUP.DATA_READ", "uncore_cha"),
    ("0x0040af37", "LLC_VICTIMS.TOTAL", "uncore_cha"),
    ("0x00400304", "CAS_COUNT.READS", "uncore_imc"),
    ("0x00400C04", "CAS_COUNT.WRITES", "uncore_imc"),
    ("0x00400B01", "ACT.ALL", "uncore_imc"),
    ("0x00400102", "PRE_COUNT.MISS", "uncore_imc"),
    ("0x00400000", "DCLK", "uncore_imc"),
    ("0x00400004", "FREQ_MAX_LIMIT_THERMAL_CYCLES", "uncore_pcu"),
    ("0x00400005", "FREQ_MAX_LIMIT_POWER_CYCLES", "uncore_pcu"),
    ("0x00400006", "PROCHOT_CYCLES", "uncore_pcu"),
    ("0x00400074", "FREQ_TRANS_CYCLES", "uncore_pcu"),
]

FIELDS = {  # Intel PERFEVTSEL layout (SDM vol. 3B 18.2.1), written out independently of the C decoder
    "event": (0, 8),
    "umask": (8, 8),
    "usr": (16, 1),
    "os": (17, 1),
    "edge": (18, 1),
    "pc": (19, 1),
    "int": (20, 1),
    "any": (21, 1),
    "en": (22, 1),
    "inv": (23, 1),
    "cmask": (24, 8),
}


def reference_decode(value: int) -> dict[str, int]:
    return {k: (value >> lo) & ((1 << bits) - 1) for k, (lo, bits) in FIELDS.items()}


def mccalpin_encodings() -> list[tuple[str, str, str]]:
    """(hex, name, family) of every event-select line of the study's tables (filter registers excluded)."""
    if not SHARED_DATA.is_dir():
        return []
    out = []
    files = {
        "cha_perfevtsel.input": "uncore_cha",
        "imc_perfevtsel.input": "uncore_imc",
        "pcu_perfevtsel.input": "uncore_pcu",
        "core_msr_perfevtsel.input": "cpu",
    }
    for fname, family in files.items():
        for line in (SHARED_DATA / fname).read_text().splitlines():
            tokens = line.split()
            hexes = [t for t in tokens if re.fullmatch(r"0x[0-9A-Fa-f]{8}", t)]
            if not hexes or tokens[-1].startswith("FILTER"):
                continue
            out.append((hexes[-1], tokens[-1], family))
    return sorted(set(out))


ALL = sorted(set(SEED_ENCODINGS) | set(mccalpin_encodings()))


def test_tables_were_found():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not present")
    names = {n for _, n, _ in mccalpin_encodings()}
    assert {"XSNP_RESP.EVICT_RSP_HITFSE", "CAS_COUNT.READS", "CYCLE_ACTIVITY.STALLS_L2_MISS"} <= names | {
        "CYCLE_ACTIVITY.STALLS_L2_MISS"
    }
    assert len(mccalpin_encodings()) >= 10


def test_decode_every_encoding():
    records = tsevents("decode", *[h for h, _, _ in ALL], sysfs=None)
    assert len(records) == len(ALL)
    for (hexval, name, _), rec in zip(ALL, records, strict=True):
        want = reference_decode(int(hexval, 16))
        got = {k: int(rec[k]) for k in FIELDS}
        assert got == want, f"{hexval} {name}"
        assert rec["reencoded"] == int(hexval, 16)


def test_decode_named_fields():
    """Spot checks that read like the seed's footnotes."""
    by = {r["value"]: r for r in tsevents("decode", "0x054305a3", "0x004200c0", "0x0063013c", sysfs=None)}
    assert (
        by["0x054305a3"]["cmask"] == 5
        and by["0x054305a3"]["umask"] == 5
        and by["0x054305a3"]["event"] == 0xA3
    )
    assert by["0x004200c0"]["os"] and not by["0x004200c0"]["usr"]  # kernel only
    assert by["0x0063013c"]["any"] and by["0x0063013c"]["umask"] == 1


def fixture_format(pmu: str) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    out = {}
    for f in (SKX_SYSFS / "bus/event_source/devices" / pmu / "format").iterdir():
        word, _, ranges = f.read_text().strip().partition(":")
        idx = {"config": 0, "config1": 1, "config2": 2}[word]
        spans = []
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            spans.append((int(lo), int(hi or lo)))
        out[f.name] = (idx, spans)
    return out


def encode_perf_string(s: str) -> tuple[str, list[int]]:
    """Python re-encoding of `pmu/term=v,.../` through the fixture's format/ files."""
    m = re.fullmatch(r"([a-z0-9_]+)/(.*)/", s)
    assert m, s
    pmu, terms = m.group(1), m.group(2)
    fmt = fixture_format(pmu)
    cfg = [0, 0, 0]
    for term in filter(None, terms.split(",")):
        name, _, value = term.partition("=")
        assert name in fmt, f"{s}: {name} is not in {pmu}/format"
        word, spans = fmt[name]
        v = int(value, 0)
        for lo, hi in spans:
            bits = hi - lo + 1
            cfg[word] |= (v & ((1 << bits) - 1)) << lo
            v >>= bits
        assert v == 0, f"{s}: {name}={value} overflows its field"
    return pmu, cfg


@pytest.mark.parametrize(("hexval", "name", "family"), ALL, ids=[f"{n}-{h}" for h, n, _ in ALL])
def test_resolves_against_skx_fixture(hexval, name, family):
    (rec,) = tsevents("resolve", f"{family}@{hexval}")
    value = int(hexval, 16)
    d = reference_decode(value)
    assert rec["family"] == family and rec["resolved_by"] == "perfevtsel"
    assert rec["scope"] == ("thread" if family == "cpu" else "unit")
    units = {"cpu": 1, "uncore_cha": 24, "uncore_imc": 6, "uncore_pcu": 1}[family]
    assert len(rec["perf"]) == units
    for s in rec["perf"]:
        pmu, cfg = encode_perf_string(s)
        assert pmu.startswith(family.removeprefix("cpu") or "cpu")
        want = d["event"] | d["umask"] << 8 | d["edge"] << 18 | d["inv"] << 23 | d["cmask"] << 24
        if family == "cpu":
            want |= d["any"] << 21 | d["pc"] << 19
        assert cfg == [want, 0, 0], s
        assert int(rec["config"], 16) == want
    if family == "cpu":  # usr/os become exclude_kernel / exclude_user
        assert rec["exclude_kernel"] == bool(d["usr"] and not d["os"])
        assert rec["exclude_user"] == bool(d["os"] and not d["usr"])


def test_filter_register_of_llc_lookup():
    """The seed's CHA FILTER0 0x01e20000 sets filter_state5 (config1 bits 17-26) to 0xf1."""
    (rec,) = tsevents("resolve", "uncore_cha_5/event=0x34,umask=0x3,filter_state5=0xf1/")
    assert int(rec["config1"], 16) == 0x01E20000
    assert rec["perf"] == ["uncore_cha_5/event=0x34,umask=0x3,filter_state5=0xf1/"]


# libpfm4 names of the seed's core events (libpfm4 4.13, PMU skx); checked where libpfm4 knows them
LIBPFM_CORE = {
    "0x004310b0": "skx::OFFCORE_REQUESTS:L3_MISS_DEMAND_DATA_RD",
    "0x004304d1": "skx::MEM_LOAD_RETIRED:L3_HIT",
    "0x004320d1": "skx::MEM_LOAD_RETIRED:L3_MISS",
    "0x054305a3": "skx::CYCLE_ACTIVITY:STALLS_L2_MISS",
    "0x064306a3": "skx::CYCLE_ACTIVITY:STALLS_L3_MISS",
    "0x00431ff1": "skx::L2_LINES_IN:ANY",
    "0x00433f24": "skx::L2_RQSTS:MISS",
    "0x00430151": "skx::L1D:REPLACEMENT",
    "0x004200c0": "skx::INST_RETIRED:ANY_P",
    "0x0042003c": "skx::CPU_CLK_UNHALTED:THREAD_P",
}


@pytest.mark.parametrize(("hexval", "pfm"), sorted(LIBPFM_CORE.items()))
def test_libpfm4_names_the_same_core_event(hexval, pfm):
    env = {**os.environ, "LIBPFM_FORCE_PMU": "skx"}  # libpfm4 only activates the PMU of the host otherwise
    try:
        (rec,) = tsevents("resolve", pfm, sysfs=None, env=env)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"libpfm4 does not know {pfm}: {exc.stderr.strip()}")
    assert rec["resolved_by"] == "libpfm4"
    d = reference_decode(int(hexval, 16))
    cfg = int(rec["config"], 16)
    assert cfg & 0xFF == d["event"] and (cfg >> 8) & 0xFF == d["umask"], pfm
    assert (cfg >> 24) & 0xFF == d["cmask"] and (cfg >> 23) & 1 == d["inv"], pfm


def test_libpfm4_uncore_names():
    """libpfm4 4.13 has SKX uncore tables but activates them only on an SKX with its uncore PMUs present."""
    env = {**os.environ, "LIBPFM_FORCE_PMU": "skx_unc_cha0"}
    try:
        (rec,) = tsevents("resolve", "skx_unc_cha0::UNC_C_SF_EVICTION:M_STATE", sysfs=None, env=env)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"libpfm4 cannot activate skx_unc_cha0 on this machine ({exc.stderr.strip()[-80:]})")
    assert int(rec["config"], 16) & 0xFFFF == 0x013D


def host_pmus() -> set[str]:
    root = Path("/sys/bus/event_source/devices")
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


PERF_CASES = [
    "task-clock",
    "context-switches",
    "cpu-migrations",
    "page-faults",
    "msr/tsc/",
    "msr/aperf/",
    "cpu@0x00431ff1",
    "uncore_cha@0x0040013d",
    "uncore_imc/cas_count_read/",
    "power/energy-pkg/",
]


@pytest.mark.parametrize("spec", PERF_CASES)
def test_perf_stat_accepts_generated_strings(spec):
    if not shutil.which("perf"):
        pytest.skip("perf (linux-perf) is not installed")
    family = spec.split("/")[0].split("@")[0]
    if ("/" in spec or "@" in spec) and not any(
        p == family or p.startswith(family + "_") for p in host_pmus()
    ):
        pytest.skip(f"this machine has no {family} PMU (checked against the fixture above instead)")
    try:
        (rec,) = tsevents("resolve", spec, sysfs=None)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"{spec} does not resolve here: {exc.stderr.strip()}")
    for s in rec["perf"][:2]:
        proc = subprocess.run(["perf", "stat", "-x,", "-e", s, "true"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        line = proc.stderr.strip().splitlines()[-1]
        if "<not supported>" in line:
            pytest.skip(f"{s}: perf says <not supported> here")
        assert re.match(r"^[0-9.]+,", line), line
