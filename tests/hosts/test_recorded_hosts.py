"""The node facts, the topology, the part (read or inferred under a hypervisor), the event set and the
reference lookup of every recorded real CPU (tests/hosts/*.toml, each from the public source it names).

Every expectation is taken from the recording itself (its topology and cache sections, its flags, the part
its model name or MIDR names), never from the machine running the suite.
"""

from __future__ import annotations

import pytest

from hosts.hostroot import NAMES, generated_numa, load
from tailscope.analysis.deep_judge import judge_arith, judge_latency, node_reference
from tailscope.analysis.reference_tables import cpu_identity, part_of, parts
from tailscope.counters.eventsets import for_node, for_part
from tailscope.counters.eventsets import load as load_set
from tailscope.node.facts import cpu_facts, cpu_flags
from tailscope.node.parts import BY_ID
from tailscope.node.read import parse_size
from tailscope.node.topology import read_sysfs

X86 = [n for n in NAMES if load(n).doc["host"]["machine"] == "x86_64"]
ARM = [n for n in NAMES if load(n).doc["host"]["machine"] == "aarch64"]
PARTS_RECORDED = {"skylake-sp", "icelake-sp", "sapphire-rapids", "granite-rapids", "zen3", "zen4", "zen5",
                  "kunpeng920", "neoverse-v2", "a64fx"}  # fmt: skip


def test_every_part_the_issue_names_is_recorded_and_every_recording_names_its_source():
    assert {load(n).expect["part"] for n in NAMES} >= PARTS_RECORDED
    for name in NAMES:
        sources = load(name).doc["source"]
        for s in sources:
            assert len(s["what"]) > 20, (name, s)
            named = "repo" in s and "path" in s and len(s["commit"]) >= 4
            assert named or len(s.get("document", "")) > 20, s
        assert sources, name


@pytest.mark.parametrize("name", [n for n in NAMES if "recorded_numa" in load(n).doc["topology"]])
def test_the_layout_reproduces_the_sources_numa_lists(name, host_root):
    """Where the source lists the NUMA nodes' CPUs, the recorded numbering gives the same lists."""
    rec = load(name)
    assert generated_numa(rec, host_root(name).root) == rec.doc["topology"]["recorded_numa"]


def _cache_bytes(rec, level: int, kinds: tuple[str, ...]) -> int | None:
    for c in rec.doc.get("cache", []):
        if c["level"] == level and c["type"] in kinds and (
            "cores" not in c or c["cores"].startswith("0")
        ):
            return parse_size(c["size"])
    return None


@pytest.mark.parametrize("name", NAMES)
def test_facts_of_each_recorded_node(name, host_root):
    rec, host = load(name), host_root(name)
    t = rec.doc["topology"]
    facts = cpu_facts(host)
    cores = t["packages"] * t["cores_per_package"]
    assert (facts["sockets"], facts["cores"], facts["threads"]) == (
        t["packages"], cores, cores * t.get("threads_per_core", 1))
    numa = len(generated_numa(rec, host.root)) or None
    assert facts["numa_nodes"] == numa
    assert facts["l1d_bytes"] == _cache_bytes(rec, 1, ("Data",))
    assert facts["l2_bytes"] == _cache_bytes(rec, 2, ("Unified",))
    assert facts["l3_bytes"] == _cache_bytes(rec, 3, ("Unified",))
    assert facts["cpufreq_max_khz"] == rec.doc.get("cpufreq", {}).get("max_khz")
    flags = set(cpu_flags(host))
    assert ("hypervisor" in flags) == (facts["virtualization"] != "none") == rec.expect["virtual"]
    assert facts["core_pmu"] is None  # no recording has a PMU tree: the software set, and it says why
    if rec.doc["host"]["machine"] == "aarch64":
        assert facts["midr"] == rec.midr and facts["cpu_model"] == int(rec.midr, 16) >> 4 & 0xFFF
        vl = rec.doc.get("files", {}).get("/proc/sys/abi/sve_default_vector_length")
        assert facts["sve_vector_bits"] == (int(vl) * 8 if vl else None)
        assert set(facts["isa"]) == {"asimd", "asimdhp", "fphp", "sve", "sve2", "sme"} & flags
    else:
        fields = dict(line.split(":", 1) for line in rec.cpuinfo.strip().splitlines())
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        assert facts["cpu_family"] == int(fields["cpu family"]) and facts["cpu_model"] == int(fields["model"])
        assert facts["cpu_model_name"] == fields["model name"]
        assert {"avx512f", "avx512_fp16", "amx_tile"} & set(facts["isa"]) == {
            "avx512f", "avx512_fp16", "amx_tile"} & flags


@pytest.mark.parametrize("name", NAMES)
def test_the_part_is_read_or_inferred_as_the_recording_says(name, host_root):
    rec = load(name)
    facts = cpu_facts(host_root(name))
    assert facts["cpu_part_id"] == rec.expect["part"], facts["cpu_part_basis"]
    assert facts["cpu_part_inferred"] is rec.expect["inferred"]
    part = BY_ID[rec.expect["part"]]
    if rec.expect["inferred"]:
        assert facts["cpu_part"] == f"likely {part.name}"
        assert facts["cpu_part_note"].startswith("virtual machine: part inferred: likely ")
    else:
        assert facts["cpu_part"] == part.name and facts["cpu_part_note"] is None
    assert facts["cpu_part_table"] == part.table  # every recording is unambiguous


@pytest.mark.parametrize("name", NAMES)
def test_topology_of_each_recorded_node(name, host_root):
    rec, host = load(name), host_root(name)
    t = rec.doc["topology"]
    topo = read_sysfs(host.path("/sys"))
    per_core = t.get("threads_per_core", 1)
    assert len(topo.pus) == t["packages"] * t["cores_per_package"] * per_core
    cpus = sorted(topo.pus)
    first, second = cpus[0], cpus[1]  # cores 0 and 1 of package 0 in every numbering here but interleaved
    if t["numbering"] == "interleaved":
        second = t["packages"]
    if per_core > 1:  # the sibling thread of core 0 is numbered after every core's first thread
        assert topo.shared(first, t["packages"] * t["cores_per_package"]) == "core"
    l3 = next((c for c in rec.doc.get("cache", []) if c["level"] == 3), None)
    if t.get("cluster"):
        assert topo.shared(first, second) == "cluster"
    elif l3 is not None:
        assert topo.shared(first, second) == "l3"
    else:
        assert topo.shared(first, second) == "package"  # no L3 (A64FX: the CMG's L2 is not an L3)
    if t["packages"] > 1:
        last = max(cpus)
        assert topo.shared(first, last) == "machine" and topo.socket_of_cpu(last) == 1


@pytest.mark.parametrize("name", NAMES)
def test_reference_lookup_and_deep_judging_of_each_recorded_node(name, host_root):
    """The published table `check --deep` judges against: the part's own by its model, the inferred part's
    only where the inference is unambiguous; a part without a table is judged on the clock alone."""
    rec, host = load(name), host_root(name)
    part = BY_ID[rec.expect["part"]]
    table = parts()[part.table] if part.table else None
    if not rec.expect["inferred"]:
        assert part_of(cpu_identity(rec.cpuinfo)) is table
    ref = node_reference([], [], host)
    assert ref.part is table
    lat = judge_latency({"working_sets": [{"name": "L1", "ns": {"median": 1.0}, "cycles": {"median": 4.0}},
                                          {"name": "L2", "ns": {"median": 4.0}, "cycles": {"median": 14.0}}]},
                        ref)  # fmt: skip
    arith = judge_arith([{"clock": [{"effective_hz": 3e9}], "table": []}], ref)
    inferred = "virtual machine: part inferred: likely " + part.name
    if table is None:
        assert "no published latency table" in lat.expected and "no published instruction" in arith.expected
    else:
        assert f"inside the published ranges for {table.name}" in lat.expected
    assert (inferred in lat.expected) is rec.expect["inferred"]


@pytest.mark.parametrize("name", NAMES)
def test_event_set_of_each_recorded_node(name, host_root):
    """The part's shipped set where one exists; with no PMU recorded, the software set and the reason."""
    rec = load(name)
    facts = cpu_facts(host_root(name))
    assert for_part(facts["cpu_part_id"]) == rec.expect.get("event_set")
    chosen, why = for_node(facts)
    assert chosen == "software" and "no core PMU here" in why
    if for_part(facts["cpu_part_id"]):
        assert load_set(for_part(facts["cpu_part_id"])).events  # the named set is shipped and parses
        assert chosen == "software" and f"the {for_part(facts['cpu_part_id'])} set needs one" in why
    with_pmu = {**facts, "core_pmu": "armv8_pmuv3_0" if name in ARM else "cpu"}
    assert for_node(with_pmu)[0] == (for_part(facts["cpu_part_id"]) or "software")


def test_the_masked_granite_rapids_is_inferred_from_flags_and_l3(host_root):
    """Issue 31's node: family 6 model 167, "Intel(R) Xeon(R) Processor", AMX and AVX512-FP16, L3 480 MiB:
    only Granite Rapids has such an L3 with those flags; it has no published table, so `check --deep` judges
    the clock-relative figures alone and says why."""
    facts = cpu_facts(host_root("granite-rapids-masked-kvm"))
    assert facts["cpu_part"] == "likely Intel Xeon 6 (Granite Rapids)"
    assert "L3 480 MiB" in facts["cpu_part_basis"] and "amx_tile" in facts["cpu_part_basis"]
    assert "family 6 model 167 is no part tailscope knows" in facts["cpu_part_basis"]
    assert "the model name 'Intel(R) Xeon(R) Processor' names no part" in facts["cpu_part_basis"]
    ref = node_reference([], [], host_root("granite-rapids-masked-kvm"))
    j = judge_arith([{"clock": [{"effective_hz": 3e9}], "table": []}], ref)
    assert "no published instruction table" in j.expected and ref.part is None


@pytest.mark.parametrize("name", ["granite-rapids-masked-kvm", "a64fx-48c", "icelake-sp-5318y-2s"])
def test_the_host_lines_ci_prints(name, host_root):
    """`tailscope facts --host` (what `make test` prints first): the CPU and its part, the flags that decide
    the kernels (and which families are absent), the kernel, VM or not, the PMU, the shape."""
    from tailscope.verbs.facts import host_lines

    host = host_root(name)
    facts, flags = cpu_facts(host), cpu_flags(host)
    lines = host_lines(facts, flags, "6.1.0", host.machine)
    assert lines[0].startswith(f"host: cpu: {facts['cpu_model_name']} (") and facts["cpu_part"] in lines[0]
    shown = lines[1].removeprefix("host: flags that matter: ").split(" (")[0].split()
    assert {"avx512_fp16", "amx_tile", "avx512f", "sve", "asimdhp"} & set(flags) <= set(shown)
    assert ("no sve*" in lines[1]) is ("sve" not in flags)
    assert ("no amx*" in lines[1]) is ("amx_tile" not in flags)
    vm = "yes" if load(name).expect["virtual"] else "no"
    assert f"6.1.0 {host.machine}; virtual machine: {vm}" in lines[2]
    assert "core PMU: none; event set: software" in lines[2]
    assert (lines[-1] == f"host: {facts['cpu_part_note']}") is load(name).expect["inferred"]


def test_facts_host_on_this_node(capsys):
    from tailscope.cli import main

    assert main(["facts", "--host"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert 4 <= len(lines) <= 5 and all(line.startswith("host: ") for line in lines)
    assert str(cpu_facts()["cpu_model_name"]) in lines[0]
