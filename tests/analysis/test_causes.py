"""The cause catalogue and the node verdicts on recorded-format evidence (evidence_fixtures.py).

Issue 14's cases: a node kept busy by stress-ng for the whole run is inconclusive and names it; a
co-runner during a window makes the node degraded: cpu-contention, naming the trials; a quiet node is
healthy; the seed's DGEMM ensemble gets its transient and its systematic run. Then one fixture per cause.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pandas as pd
import pytest
from evidence_fixtures import AMD_ZEN4, INTEL_SKX, Trial, analyze_ensemble, ensemble

from tailscope.analysis.causes import CATALOGUE
from tailscope.analysis.wording import pct

STRESS = ((4242, "stress-ng", 0.41),)


def _flagged(analysis):
    return {r.trial: r for r in analysis.runs if r.flagged}


def _node(analysis, node="n1"):
    (n,) = [n for n in analysis.nodes if n.node == node]
    return n


def test_the_catalogue_has_the_issue_vocabulary():
    assert set(CATALOGUE) == {
        "cpu-contention", "os-noise", "memory-bandwidth-contention", "cache-contention", "frequency",
        "memory-pressure", "thp-fallback", "page-placement", "numa-placement", "hardware-config", "unknown",
    }  # fmt: skip
    for name, module in CATALOGUE.items():
        assert name == module.NAME and module.READS


def test_busy_node_is_inconclusive_and_names_who_ran():
    busy = {k: Trial(slowdown=0.45 + 0.02 * (k % 3), others=0.48, corunners=((4242, "stress-ng", 0.46),))
            for k in range(1, 41)}  # fmt: skip
    a = analyze_ensemble(ensemble(busy))
    n1 = _node(a)
    assert n1.verdict == "inconclusive" and a.verdict.state == "inconclusive"
    assert n1.busy_share == pytest.approx(0.48)
    first = n1.reasons[0]
    assert "too busy to judge: other processes took 48% of CPU 0 in the median trial" in first
    assert "40 of 40 trials above the limit" in first
    assert "stress-ng (pid 4242) 46% in 40 trials" in first
    assert "rerun when the node is idle, or reserve the probe CPUs" in first
    assert n1.causes[0].cause == "cpu-contention" and n1.causes[0].evidence["corunners"][0]["pids"] == [4242]
    # The same trials on a quiet node with a larger busy limit: no longer judged inconclusive for that.
    lenient = analyze_ensemble(ensemble(busy), max_busy_share=0.6)
    assert not _node(lenient).reasons[0].startswith("too busy")


def test_window_corunner_is_degraded_cpu_contention_naming_the_trials():
    window = {k: Trial(slowdown=0.41, others=0.43, corunners=STRESS) for k in range(13, 22)}
    a = analyze_ensemble(ensemble(window))
    n1 = _node(a)
    assert n1.verdict == "degraded"
    assert [c.cause for c in n1.causes] == ["cpu-contention"]
    assert n1.causes[0].evidence["trials"] == list(range(13, 22))
    assert n1.reasons[0].startswith(
        "cpu-contention in trials 13-21 (9 of 9 flagged runs of l2sum): "
        "stress-ng (pid 4242) took 41% of CPU 0"
    )
    flagged = _flagged(a)
    assert set(flagged) == set(range(13, 22))
    top = flagged[15].causes[0]
    assert top.cause == "cpu-contention" and top.confidence == "high" and top.score == 1.0
    assert (
        top.sentence.startswith("trial 15 (40.9% slower): ")
        and "stress-ng (pid 4242) took 41% of CPU 0" in top.sentence
    )
    assert top.evidence["others_share"] == pytest.approx(0.43)
    # Quiet trials' 2 ms of others is below the 10 ms tick noise of /proc/stat (EVIDENCE.md): counted 0.
    assert top.evidence["usual_others_share"] == 0.0
    # Every flagged run has ranked causes with evidence values; unflagged runs have none.
    assert all(r.causes for r in flagged.values())
    assert not any(r.causes for r in a.runs if not r.flagged)


def test_the_noise_floor_is_the_nodes_own_without_the_runs_interference_explains():
    """A co-runner in 3 of 12 trials widens the MAD of all 12 past the 5% threshold (seen here: `check
    --trials 12` with stress-ng for 15 s made all four probes 'too noisy' and the node inconclusive). The
    floor without those 3 runs, which cpu-contention explains with direct evidence, is the node's own."""
    from tailscope.analysis.robust import noise_floor

    window = {k: Trial(slowdown=0.3, others=0.33, corunners=STRESS) for k in (4, 5, 6)}
    a = analyze_ensemble(ensemble(window, n=12, noise=0.07, seed=6))
    g = a.groups[0]
    assert noise_floor(g.mad, g.median) > 0.05  # all 12 runs: too noisy, as before
    n1 = _node(a)
    assert n1.verdict == "degraded" and [c.cause for c in n1.causes] == ["cpu-contention"]
    assert n1.causes[0].evidence["trials"] == [4, 5, 6]
    # Where the node's own noise is above the threshold too, it stays inconclusive and says both figures.
    noisy = _node(analyze_ensemble(ensemble(window, n=12, noise=0.07, seed=3)))
    assert noisy.verdict == "inconclusive"
    assert re.search(
        r"l2sum: too noisy to judge: runs vary by [\d.]+% \(robust CV over 12 runs; [\d.]+% without the 3 "
        r"runs that evidenced interference explains\), so only slowdowns above",
        noisy.reasons[0],
    )


def test_quiet_node_is_healthy():
    a = analyze_ensemble(ensemble())
    n1 = _node(a)
    assert n1.verdict == "healthy" and a.verdict.passed
    assert n1.reasons[0].startswith("every probe within the limits: l2sum (40 runs, noise")
    assert n1.busy_share == 0.0  # 2 ms of others per 0.5 s trial: below the /proc/stat tick noise


def test_dgemm_ensemble_of_the_seed_transient_and_systematic_with_default_settings():
    """20 runs of 12 calls; one run with one call 10% slow, one run uniformly 1.1% low with 0.08% spread.
    Both are far below the 5% threshold, but far outside a 0.08% noise: flagged as robust outliers."""
    trials = {5: Trial(iteration_slow={7: 0.10}), 12: Trial(slowdown=0.011)}
    a = analyze_ensemble(
        ensemble(trials, n=20, iterations=12, probe="dgemm", noise=0.0008, with_evidence=False)
    )
    flagged = _flagged(a)
    assert set(flagged) == {5, 12}
    transient, systematic = flagged[5], flagged[12]
    assert transient.kind == "transient" and transient.evidence.low == 1
    assert systematic.kind == "systematic" and systematic.evidence.low == 12
    assert systematic.evidence.spread < 0.002
    # Imported runs without evidence: unknown, saying so, with the run's shape.
    for r in (transient, systematic):
        assert [c.cause for c in r.causes] == ["unknown"]
        assert "no evidence recorded" in r.causes[0].sentence
    assert "interference during part of the run" in transient.causes[0].sentence
    assert "a level shift over the whole run" in systematic.causes[0].sentence


def test_os_noise_from_interrupts_and_kernel_threads():
    noisy = {k: Trial(slowdown=0.08, irq=0.05, interrupts_per_s=20000.0,
                      corunners=((17, "ksoftirqd/0", 0.02),)) for k in (7, 19)}  # fmt: skip
    a = analyze_ensemble(ensemble(noisy))
    top = _flagged(a)[7].causes[0]
    assert top.cause == "os-noise"
    # usual 0.5 ms per 0.5 s trial: below /proc/stat's tick resolution, counted 0
    assert "irq+softirq took 5% (usual 0%)" in top.sentence
    assert "20,000/s (usual 250/s) interrupts per CPU" in top.sentence
    assert "ksoftirqd/0 (pid 17)" in top.sentence
    assert top.evidence["explained"] == pytest.approx(0.05 + 0.02 + 19750 * 2e-6, rel=0.01)
    assert top.score == 1.0  # more than the 8% slowdown


def test_many_short_preemptions_are_os_noise_not_cpu_contention():
    """Recorded on this VM: tsinject os-noise at 20,000 wake-ups/s took 38% of the CPU (/proc/stat) and
    preempted the probe 18,000 times a second for ~19 us each; a busy loop sharing the CPU preempts it ~100
    times a second for ~1.5 ms each. Who made the detours is not what tells them apart: their length is."""
    noisy = {k: Trial(slowdown=0.26, others=0.38, run_delay=0.35, preempt_per_s=18000.0,
                      corunners=((27151, "tsinject", 0.37),)) for k in (11, 12)}  # fmt: skip
    a = analyze_ensemble(ensemble(noisy))
    causes = _flagged(a)[11].causes
    assert causes[0].cause == "os-noise" and causes[0].score == 1.0
    assert "preempted 17,99" in causes[0].sentence
    assert "most likely by tsinject (pid 27151)" in causes[0].sentence
    assert causes[0].evidence["detour_us"] == pytest.approx(0.346 / 17990 * 1e6, rel=0.02)
    assert "frequency" not in [c.cause for c in causes]
    # the same detours with the add chain reading an 11% lower clock: the detours' time, not a frequency
    noisy_clock = {k: Trial(slowdown=0.26, others=0.38, run_delay=0.35, preempt_per_s=18000.0,
                            mhz=0.89 * 3694, corunners=((27151, "tsinject", 0.37),))
                   for k in (11, 12)}  # fmt: skip
    clocked = _flagged(analyze_ensemble(ensemble(noisy_clock)))[11].causes
    assert clocked[0].cause == "os-noise" and "frequency" not in [c.cause for c in clocked]
    # recorded in another run: 18,000 wake-ups/s read as a 70% lower clock, more than the detours' share;
    # with a wake-up in most ~120 us chunks the add chain has no clean chunk left to read
    far = {k: Trial(slowdown=0.68, others=0.45, run_delay=0.45, preempt_per_s=18000.0, mhz=0.3 * 3694)
           for k in (11, 12)}  # fmt: skip
    assert "frequency" not in [c.cause for c in _flagged(analyze_ensemble(ensemble(far)))[11].causes]
    # a real clock drop beside a few short detours is still a frequency finding
    capped = {k: Trial(slowdown=0.2, run_delay=0.01, preempt_per_s=400.0, mhz=0.8 * 3694) for k in (11, 12)}
    assert _flagged(analyze_ensemble(ensemble(capped)))[11].causes[0].cause == "frequency"
    # cpu-contention keeps only what the short detours do not account for (others 38% - 35%)
    rest = [c for c in causes if c.cause == "cpu-contention"]
    assert not rest or rest[0].score < 0.2
    # The same CPU share as a co-runner's time slices (1.5 ms per preemption) is cpu-contention.
    sliced = {k: Trial(slowdown=0.26, others=0.38, run_delay=0.35, preempt_per_s=230.0,
                       corunners=((4242, "stress-ng", 0.37),)) for k in (11, 12)}  # fmt: skip
    top = _flagged(analyze_ensemble(ensemble(sliced)))[11].causes[0]
    assert top.cause == "cpu-contention" and "stress-ng (pid 4242) took 37%" in top.sentence


def test_a_named_share_is_held_to_what_proc_stat_saw_in_the_trial():
    """Recorded under thp-fragment: the injector's minute of set-up before the trial was named at 45% of the
    trial by the scan's rate, while /proc/stat saw 6% more than usual; the trial's huge pages fell back."""
    fell = {k: Trial(slowdown=0.15, others=0.064, run_delay=0.05, corunners=((16471, "tsinject", 0.447),),
                     vm={"thp_fault_alloc": 50.0, "thp_fault_fallback": 146.0})
            for k in (8, 9)}  # fmt: skip
    r = _flagged(analyze_ensemble(ensemble(fell, page_policy="thp")))[8]
    assert r.causes[0].cause == "thp-fallback"
    cpu = [c for c in r.causes if c.cause == "cpu-contention"]
    assert cpu and cpu[0].evidence["explained"] == pytest.approx(0.06 + 0.02 / 0.5, abs=0.005)


def test_cpu_contention_leads_with_the_evidence_that_made_it():
    # steal: the hypervisor is named first, and a co-runner below 2% of the CPUs is not named at all
    stolen = {k: Trial(slowdown=0.12, steal=0.10, run_delay=0.10,
                       corunners=((91, "memfd:sealed-91", 0.012),)) for k in (5, 6)}  # fmt: skip
    top = _flagged(analyze_ensemble(ensemble(stolen)))[5].causes[0]
    assert top.cause == "cpu-contention"
    assert top.sentence.split(": ", 1)[1].startswith("the hypervisor stole 10%")
    assert "memfd" not in top.sentence and top.evidence["corunners"] == []
    # run-queue wait with nobody else running: a quota or the host, said so (cpu-quota recorded here: 74%
    # run-queue wait, 3% others, 18 preemptions a second)
    held = {k: Trial(slowdown=0.7, others=0.03, run_delay=0.74, preempt_per_s=18.0) for k in (5, 6)}
    top = _flagged(analyze_ensemble(ensemble(held)))[5].causes[0]
    assert top.cause == "cpu-contention"
    assert "no process of this OS took their CPUs: a CPU quota on the probe's cgroup" in top.sentence


def test_cpu_contention_names_the_newcomer_not_the_nodes_usual_background():
    # Recorded shape of the live LAMMPS run on a busy node: python and sh take CPU 1 in every trial (30%,
    # 20%), stress-ng starts for three trials and takes 20%. Ranked by raw share the sentence named python
    # and sh; what made these trials slow is stress-ng, and the background is not named at all.
    background = ((311, "python", 0.30), (412, "sh", 0.20))
    usual = Trial(others=0.5, run_delay=0.02, corunners=background)
    stress = (4242, "stress-ng", 0.2)
    stressed = Trial(slowdown=0.2, others=0.7, run_delay=0.2, corunners=(*background, stress))
    trials = {k: (stressed if k in (6, 7, 8) else usual) for k in range(1, 11)}
    flagged = _flagged(analyze_ensemble(ensemble(trials, n=10)))
    assert sorted(flagged) == [6, 7, 8]
    for r in flagged.values():
        top = r.causes[0]
        assert top.cause == "cpu-contention"
        said = top.sentence.split(": ", 1)[1]
        assert said.startswith("stress-ng (pid 4242) took 20% of CPU 0 during the trial"), said
        assert "python" not in said and "sh (pid" not in said
        assert [c["comm"] for c in top.evidence["corunners"]] == ["stress-ng"]
    # a background process that takes more than its usual in a slow trial is named, against its usual
    hungry = ((311, "python", 0.50), (412, "sh", 0.20))
    hungrier = Trial(slowdown=0.2, others=0.7, run_delay=0.2, corunners=hungry)
    top = _flagged(analyze_ensemble(ensemble({**trials, 7: hungrier}, n=10)))[7].causes[0]
    assert top.sentence.split(": ", 1)[1].startswith("python (pid 311) took 50% (usual 30%) of CPU 0"), top
    assert top.evidence["corunners"] == [{"pid": 311, "comm": "python", "share": 0.5, "usual": 0.3}]


def test_memory_pressure_from_reclaim_and_major_faults():
    pressed = {21: Trial(slowdown=0.2, vm={"pgscan_direct": 51200.0, "allocstall_normal": 40.0,
                                           "compact_stall": 12.0, "pgmajfault": 300.0})}  # fmt: skip
    a = analyze_ensemble(ensemble(pressed))
    top = _flagged(a)[21].causes[0]
    assert top.cause == "memory-pressure"
    assert (
        "51,200 pages scanned by direct reclaim, 40 allocation stalls, 12 compaction stalls" in top.sentence
    )
    assert "300 major faults" in top.sentence
    # (40 + 12) stalls x 1 ms + 300 faults x 0.1 ms over 0.5 s = 16.4% of 20%
    assert top.score == pytest.approx(0.164 / 0.2, rel=0.01)


def test_swap_thrash_is_memory_pressure_before_the_kernel_work_it_makes():
    """Recorded shape on this VM with an 8 GiB swap file and a process writing 23 GiB of pages in a loop:
    stream 15-30% slower, thousands of major faults, swap I/O interrupts and softirqs. Both memory-pressure
    and os-noise explain the whole slowdown; the root cause is named first."""
    thrash = {k: Trial(slowdown=0.25, irq=0.25, interrupts_per_s=9000.0,
                       vm={"pgmajfault": 40000.0, "pgscan_kswapd": 900000.0, "pgscan_direct": 3000.0,
                           "allocstall_normal": 30.0})
              for k in (20, 21, 22)}  # fmt: skip
    r = _flagged(analyze_ensemble(ensemble(thrash)))[21]
    scores = {c.cause: c.score for c in r.causes}
    assert scores["memory-pressure"] == 1.0 and scores["os-noise"] == 1.0  # a tie: the order decides
    assert r.causes[0].cause == "memory-pressure"
    assert "40,000 major faults" in r.causes[0].sentence


def test_thp_fallback_is_a_level_shift_with_small_pages():
    fell = {9: Trial(slowdown=0.12, vm={"thp_fault_alloc": 2.0, "thp_fault_fallback": 30.0})}
    a = analyze_ensemble(ensemble(fell, page_policy="thp"))
    r = _flagged(a)[9]
    assert r.kind == "systematic"
    top = r.causes[0]
    assert top.cause == "thp-fallback"
    assert "30 huge-page faults fell back to small pages" in top.sentence
    assert "it got 2 huge pages where normal runs got 32" in top.sentence
    assert top.evidence["fallback_fraction"] == pytest.approx(30 / 32)
    assert "compact_memory" in top.mitigation


def test_thp_fallback_owns_the_compaction_stalls_of_its_failed_huge_pages():
    """Recorded on this VM under tsinject thp-fragment: 119 fallbacks, 357 compaction stalls, 119 allocation
    stalls and 2,497 pages of direct reclaim in one trial, with memory free but in 4 KiB holes."""
    fragmented = {k: Trial(slowdown=0.3, vm={"thp_fault_alloc": 73.0, "thp_fault_fallback": 119.0,
                                             "compact_stall": 357.0, "allocstall_normal": 119.0,
                                             "pgscan_direct": 2497.0, "pgmajfault": 2.0})
                  for k in (9, 10)}  # fmt: skip
    r = _flagged(analyze_ensemble(ensemble(fragmented, page_policy="thp")))[9]
    assert r.causes[0].cause == "thp-fallback" and r.causes[0].score == 1.0
    assert "476 compaction and allocation stalls looking for 2 MiB blocks" in r.causes[0].sentence
    pressure = [c for c in r.causes if c.cause == "memory-pressure"]
    assert not pressure or pressure[0].score < 0.3  # only the 2 major faults are its own


def test_a_node_short_of_memory_is_memory_pressure_even_where_huge_pages_fell_back():
    """Recorded on this VM in validate under tsinject memthrash (an 8 GiB swap file, the node paging): the
    first trial of a block, 67% slower, with 160 huge-page faults fallen back. kswapd reclaimed (161,113
    pages scanned) and the node took 9,753 major faults: the shortage is the cause, the fallbacks one of its
    effects. The old rule gave the stalls to thp-fallback and named it first in 8 of 36 such runs."""
    thrash = {k: Trial(slowdown=0.67, vm={"thp_fault_alloc": 32.0, "thp_fault_fallback": 160.0,
                                          "pgscan_direct": 85921.0, "allocstall_normal": 346.0,
                                          "compact_stall": 178.0, "pgmajfault": 9753.0,
                                          "pgscan_kswapd": 161113.0})
              for k in (20, 21)}  # fmt: skip
    r = _flagged(analyze_ensemble(ensemble(thrash, probe="stream")))[20]
    assert r.causes[0].cause == "memory-pressure" and r.causes[0].score == 1.0
    assert "161,113 pages scanned by kswapd" in r.causes[0].sentence
    thp = next(c for c in r.causes if c.cause == "thp-fallback")
    assert thp.score < r.causes[0].score and thp.evidence["short_of_memory"] is True
    assert "the node was short of memory (kswapd reclaimed)" in thp.sentence
    # the same trial without kswapd's reclaim is fragmentation: the stalls are the failed 2 MiB allocations'
    fragmented = {k: Trial(slowdown=0.67, vm={**thrash[k].vm, "pgscan_kswapd": 0.0, "pgmajfault": 2.0})
                  for k in (20, 21)}  # fmt: skip
    f = _flagged(analyze_ensemble(ensemble(fragmented, probe="stream")))[20]
    assert f.causes[0].cause == "thp-fallback" and f.causes[0].evidence["short_of_memory"] is False


def test_frequency_from_the_effective_clock():
    slow_clock = {k: Trial(slowdown=0.10, mhz=3325.0) for k in (3, 4)}
    a = analyze_ensemble(ensemble(slow_clock, probe="dgemm"))
    top = _flagged(a)[3].causes[0]
    assert top.cause == "frequency"
    assert "effective clock 3,325 MHz (usual 3,694 MHz)" in top.sentence
    assert top.evidence["clock_drop"] == pytest.approx(1 - 3325 / 3694, rel=1e-4)
    assert "virtual machine" not in top.sentence
    guest = _flagged(analyze_ensemble(ensemble(slow_clock, probe="dgemm", facts={"virtualization": "kvm"})))
    assert "another guest on the same physical core" in guest[3].causes[0].sentence
    assert "ask the host's operator" in guest[3].causes[0].mitigation


def test_memory_bandwidth_contention_by_elimination_on_a_bandwidth_probe():
    window = {k: Trial(iteration_slow={i: 0.3 for i in range(5, 12)}) for k in (30, 31)}
    a = analyze_ensemble(ensemble(window, probe="stream"))
    r = _flagged(a)[30]
    assert r.kind == "transient"
    assert r.causes[0].cause == "memory-bandwidth-contention" and r.causes[0].confidence == "low"
    # The same shape on a compute probe has no such explanation.
    b = analyze_ensemble(ensemble(window, probe="dgemm"))
    assert _flagged(b)[30].causes[0].cause == "unknown"


def test_page_placement_only_by_elimination_and_vendor_aware():
    shift = {11: Trial(slowdown=0.09)}
    amd = _flagged(analyze_ensemble(ensemble(shift, facts=AMD_ZEN4)))[11]
    assert amd.kind == "systematic"
    causes = [c.cause for c in amd.causes]
    assert causes[0] == "page-placement"
    text = amd.causes[0].mitigation
    assert "snoop" not in text.lower() and "slice" not in text.lower() and "1 GiB pages" in text
    intel = _flagged(analyze_ensemble(ensemble(shift, facts=INTEL_SKX)))[11]
    assert "Intel Skylake-SP / Cascade Lake" in intel.causes[0].mitigation
    assert "snoop filter" in intel.causes[0].mitigation
    # With a co-runner explaining the shift, pages are not blamed (issue 14: a busy node blamed on pages).
    busy = {11: Trial(slowdown=0.09, others=0.1, corunners=((9, "backup", 0.09),))}
    r = _flagged(analyze_ensemble(ensemble(busy, facts=AMD_ZEN4)))[11]
    assert r.causes[0].cause == "cpu-contention"
    assert "page-placement" not in [c.cause for c in r.causes]


def test_on_a_virtual_machine_pages_are_never_the_confident_answer():
    """Recorded on this KVM guest: stream runs 27-34% slow with no CPU lost while the host's memory bandwidth
    dropped were called page-placement at 0.8; guest-physical pages do not say where the host put memory."""
    shift = {k: Trial(slowdown=0.3) for k in (11, 12)}
    kvm = {**AMD_ZEN4, "virtualization": "kvm"}
    vm = _flagged(analyze_ensemble(ensemble(shift, probe="stream", facts=kvm)))
    causes = vm[11].causes
    placement = [c for c in causes if c.cause == "page-placement"]
    assert placement and placement[0].confidence == "low" and placement[0].score <= 0.15
    assert "virtual machine (kvm)" in placement[0].sentence
    assert causes[0].cause == "memory-bandwidth-contention"
    assert "the host's other tenants (a virtual machine)" in causes[0].sentence
    # the same runs on bare metal keep page-placement first (by elimination)
    metal = _flagged(analyze_ensemble(ensemble(shift, probe="stream", facts=AMD_ZEN4)))
    assert metal[11].causes[0].cause == "page-placement"


def test_numa_placement_only_on_numa_nodes():
    remote = {6: Trial(slowdown=0.15, vm={"numa_hit": 10000.0, "numa_miss": 10000.0})}
    two = {**AMD_ZEN4, "numa_nodes": 2}
    top = _flagged(analyze_ensemble(ensemble(remote, facts=two)))[6].causes[0]
    assert top.cause == "numa-placement" and top.evidence["numa_remote_fraction"] == pytest.approx(0.5)
    one = {**AMD_ZEN4, "numa_nodes": 1}
    causes = [c.cause for c in _flagged(analyze_ensemble(ensemble(remote, facts=one)))[6].causes]
    assert "numa-placement" not in causes


def test_hardware_config_names_the_fact_that_differs_on_a_slow_node():
    parts = []
    for i in range(4):
        level = 90.0 if i == 3 else 100.0
        facts = {**AMD_ZEN4, "microcode": "0xa101148" if i == 3 else "0xa10113e", "governor": "performance"}
        parts.append(ensemble(n=12, node=f"n{i}", level=level, facts=facts, seed=i))
    e = parts[0]
    for p in parts[1:]:
        for name in ("runs", "iterations", "counters", "corunners", "nodes"):
            setattr(e, name, pd.concat([getattr(e, name), getattr(p, name)], ignore_index=True))
    a = analyze_ensemble(e)
    n3 = _node(a, "n3")
    assert n3.verdict == "degraded" and n3.drain
    hw = next(c for c in n3.causes if c.cause == "hardware-config")
    assert hw.evidence["differs"] == {"microcode": {"node": "0xa101148", "peers": "0xa10113e"}}
    assert "microcode 0xa101148 (peers: 0xa10113e)" in hw.sentence
    assert [n.verdict for n in a.nodes if n.node != "n3"] == ["healthy"] * 3
    # The fleet screen and the per-group outlier flag name the same node.
    assert {g.node for g in a.groups if g.node_outlier} == {"n3"}


def test_analyze_json_has_causes_per_run_and_verdict_per_node():
    window = {k: Trial(slowdown=0.41, others=0.43, corunners=STRESS) for k in range(13, 22)}
    doc = json.loads(json.dumps(analyze_ensemble(ensemble(window)).to_json(), allow_nan=False))
    run = next(r for r in doc["runs"] if r["trial"] == 13)
    assert run["flagged"] and run["causes"][0]["cause"] == "cpu-contention"
    assert set(run["causes"][0]) == {"cause", "score", "confidence", "evidence", "sentence", "mitigation"}
    assert run["causes"][0]["evidence"]["corunners"] == [{"pid": 4242, "comm": "stress-ng", "share": 0.41}]
    quiet = next(r for r in doc["runs"] if r["trial"] == 1)
    assert quiet["causes"] == [] and not quiet["flagged"]
    (node,) = doc["nodes"]
    assert node["node"] == "n1" and node["verdict"] == "degraded"
    assert node["reasons"][0].startswith("cpu-contention in trials 13-21")
    assert node["limits"] and doc["verdict"]["state"] == "degraded"


def test_without_evidence_a_busy_fwq_makes_the_node_inconclusive(build):
    """Imported or pre-evidence campaigns: fwq's noise fraction (time each quantum lost) says how busy."""
    from tailscope.analysis.model import Settings
    from tailscope.analysis.summary import analyze

    rows, parts = [], []
    for trial in range(8):
        row = build.run_row(
            "n1", trial, 300.0, variant="fwq-1", probe="fwq", unit="us", higher_is_better=False
        )
        rows.append(row)
        samples = [100.0] + [300.0 + trial] * 99  # every quantum but the fastest lost ~2/3 of its time
        parts.append(build.thread_iterations(row["run_id"], 0, samples))
    a = analyze(build.runs_frame(rows), build.iterations_frame(parts), Settings(), "c")
    (n1,) = a.nodes
    assert n1.verdict == "inconclusive"
    assert n1.reasons[0].startswith("too busy to judge: the fwq probe lost 66")
    assert "who ran is not recorded (no evidence rows" in n1.reasons[0]


def test_the_offset_sweep_advice_is_vendor_aware():
    from tailscope.node.hugepages import sweep_advice

    assert "snoop" not in sweep_advice(AMD_ZEN4).text and "AMD EPYC 9654" in sweep_advice(AMD_ZEN4).text
    intel = sweep_advice(INTEL_SKX).text
    assert "snoop filter (Intel Skylake-SP / Cascade Lake" in intel and "Xeon 8160" in intel


def test_a_spec_can_turn_a_default_limit_off():
    from tailscope.analysis.settings import settings_from_dict

    s = settings_from_dict({"max_slow_rate": "off", "max_cv_ratio": 4, "max_busy_share": 0.2})
    assert (s.max_slow_rate, s.max_cv_ratio, s.max_busy_share, s.max_q01_drop) == (None, 4.0, 0.2, 0.005)
    with pytest.raises(ValueError, match="setting max_busy_share: expected a number in \\[0, 1\\], got 2"):
        settings_from_dict({"max_busy_share": 2})


def test_who_ran_is_grouped_by_command_name():
    """A co-runner with several worker processes (stress-ng --cpu 2) is one "who": its share per trial is
    the sum over its processes (seen live on this VM: stress-ng-cpu under two pids)."""
    workers = ((5001, "stress-ng-cpu", 0.2), (5002, "stress-ng-cpu", 0.2), (77, "stream", 0.05))
    busy = {k: Trial(slowdown=0.4, others=0.45, corunners=workers) for k in range(1, 41)}
    (n1,) = analyze_ensemble(ensemble(busy)).nodes
    assert (
        "who ran there: stress-ng-cpu (pids 5001, 5002) 40% in 40 trials, stream (pid 77) 5%" in n1.reasons[0]
    )
    assert n1.causes[0].sentence.startswith("stress-ng-cpu (pids 5001, 5002) kept CPU 0 busy: 45%")


def test_short_trials_use_the_process_scan_when_proc_stat_ticks_are_too_coarse():
    """On 50 ms trials /proc/stat's 10 ms ticks say nothing below 20 ms (seen live: 'other processes used 0%'
    beside a co-runner at 71%); the co-runners' scanned share still decides, and the zero is not printed."""
    short = {k: Trial(slowdown=0.3, others=0.3, corunners=((2038, "tsinject", 0.31),)) for k in (5, 6)}
    e = ensemble(short)
    wall = e.counters["event"] == "wall_s"
    e.counters.loc[wall, "value"] = 0.05
    # A 10x shorter trial: 15 ms of others, below the 20 ms tick floor; the run-queue wait scales too.
    for event in ("others_s", "irq_s", "softirq_s", "run_delay_s", "run_s"):
        rows = e.counters["event"] == event
        e.counters.loc[rows, "value"] = e.counters.loc[rows, "value"] * 0.1
    top = _flagged(analyze_ensemble(e))[5].causes[0]
    assert top.cause == "cpu-contention" and top.evidence["by"] == "corunner_share"
    assert "tsinject (pid 2038) took 31% of CPU 0" in top.sentence
    assert "other processes used" not in top.sentence


def test_os_noise_leads_with_the_evidence_that_explains_most():
    """Recorded on this quiet VM: fwq runs with FWQ noise 10.6% of each quantum (usual 3.8%) and nothing
    unusual in irq time or interrupt counts; the terminal cut the sentence after 'irq+softirq took 0%'."""
    from tailscope.analysis.causes import diagnose
    from tailscope.analysis.causes.context import RunContext

    now = {"irq_share": 0.0, "interrupts_per_s": 315.0, "timer_per_s": 242.0, "noise_fraction": 0.106,
           "noise_period_s": 0.0022, "wall_s": 0.3}  # fmt: skip
    usual = {"irq_share": 0.0, "interrupts_per_s": 330.0, "timer_per_s": 249.0, "noise_fraction": 0.038}
    ctx = RunContext(
        run_id="r9", node="vm", probe="fwq", variant="fwq-1", trial=9, slowdown=0.058, kind="transient",
        kind_evidence=None, has_evidence=True, now=now, usual=usual, cpus=(0, 1), corunners=(),
    )  # fmt: skip
    top = diagnose(ctx)[0]
    assert top.cause == "os-noise"
    assert top.sentence.split(": ", 2)[2].startswith("FWQ noise 10.6% (usual 3.8%) of each quantum")


def test_a_small_clock_drop_does_not_hide_memory_bandwidth_contention():
    """validate on this KVM guest: membw on the neighbour CPU lowered the probe CPU's effective clock by
    1.4-3% while stream ran 8-18% slower, and every such run was called `frequency` (memory-bandwidth-
    contention required the clock as usual). A drop explaining less than half the slowdown leaves both."""
    usual = 3694.0
    small = {k: Trial(iteration_slow={i: 0.3 for i in range(5, 12)}, mhz=usual * 0.98) for k in (30, 31)}
    r = _flagged(analyze_ensemble(ensemble(small, probe="stream")))[30]
    names = [c.cause for c in r.causes]
    assert names[0] == "memory-bandwidth-contention" and "frequency" in names, r.causes
    assert (
        f"its clock was only 2% lower, at most 2% of the {pct(r.slowdown)} slowdown" in r.causes[0].sentence
    )
    # a drop that explains the slowdown is frequency's alone
    large = {k: Trial(slowdown=0.10, mhz=usual * 0.91) for k in (30, 31)}
    r = _flagged(analyze_ensemble(ensemble(large, probe="stream")))[30]
    assert r.causes[0].cause == "frequency"
    assert "memory-bandwidth-contention" not in [c.cause for c in r.causes]


def test_unknown_says_when_the_iteration_noise_is_too_wide_to_tell_a_low_iteration():
    """classify's low cut is 1 - 3 sds of the node's iteration noise: on a busy node it can fall below 0,
    and 'below 185% under the usual' was written."""
    from tailscope.analysis.causes import unknown
    from tailscope.analysis.causes.context import RunContext
    from tailscope.analysis.model import KindEvidence

    wide = KindEvidence(20, 0, 0.0, 0.4, 0.01, 0.9, low_cut=-0.85, reference=150.0)
    ctx = RunContext(
        run_id="r3", node="n1", probe="l2sum", variant="l2sum-1", trial=3, slowdown=0.6, kind="unclassified",
        kind_evidence=wide, has_evidence=False, now={}, usual={}, cpus=(0,), corunners=(),
    )  # fmt: skip
    assert unknown.shape(ctx) == "its node's iterations vary too much to tell a low one (20 iterations)"
    usual = dataclasses.replace(ctx, kind_evidence=dataclasses.replace(wide, low=3, low_cut=0.95))
    assert unknown.shape(usual).startswith("3 of 20 iterations low (more than 5% under the usual)")


def test_the_check_answer_shows_fewer_causes_rather_than_run_past_its_screen():
    """`check` gives render_answer the lines left on a 40-line screen (cli.cmd_check): the causes are cut
    from the least important, never below one, and the header says how many are shown (CI: a live check
    printed 41 lines when three causes each wrapped over 3-7)."""
    from evidence_fixtures import MHZ

    from tailscope.report.terminal import MAX_FINDINGS, render_answer

    trials = {k: Trial(slowdown=0.3, others=0.33, corunners=((4242, "stress-ng", 0.31),)) for k in (3, 4)}
    trials |= {k: Trial(slowdown=0.08, irq=0.05, interrupts_per_s=20000.0) for k in (9, 10)}
    trials |= {k: Trial(slowdown=0.10, mhz=MHZ * 0.9) for k in (15, 16)}
    analysis = analyze_ensemble(ensemble(trials, n=30))
    full = render_answer(analysis, width=100, campaign_dir="/c")
    heads = [line for line in full if line.startswith("causes of the flagged runs")]
    assert len([line for line in full if re.match(r"  \d\. ", line)]) == MAX_FINDINGS, full
    for limit in range(len(full) - 1, 0, -1):
        cut = render_answer(analysis, width=100, campaign_dir="/c", max_lines=limit)
        shown = [line for line in cut if re.match(r"  \d\. ", line)]
        assert len(shown) >= 1
        if len(shown) > 1:
            assert len(cut) <= limit, (limit, cut)
        if len(shown) < MAX_FINDINGS:
            assert f"({len(shown)} of " in next(x for x in cut if x.startswith("causes of the flagged runs"))
        assert cut[0] == full[0] and cut[-1] == full[-1]  # the verdict first, the terms last
    assert heads and render_answer(analysis, width=100, campaign_dir="/c", max_lines=len(full)) == full
    one = render_answer(analysis, width=100, campaign_dir="/c", max_lines=1)
    assert len([line for line in one if re.match(r"  \d\. ", line)]) == 1


@pytest.mark.parametrize(("policy", "found"), [("thp", True), ("2m", True), ("4k", False)])
def test_thp_fallback_reads_the_stored_page_policy(policy, found):
    """The runner stores runs.page_policy for every run (the default thp too) and thp-fallback reads it: on a
    node whose normal runs got no huge pages either, only the run's own policy says it asked for them. (It
    read params["pages"], a key nothing writes; its tests invented the key.)"""
    no_huge = {"thp_fault_alloc": 0.0, "thp_fault_fallback": 0.0}
    fell = {9: Trial(slowdown=0.12, vm={"thp_fault_alloc": 0.0, "thp_fault_fallback": 30.0})}
    a = analyze_ensemble(ensemble(fell, params="{}", page_policy=policy, quiet_vm=no_huge))
    causes = [c.cause for c in _flagged(a)[9].causes]
    assert ("thp-fallback" in causes) is found, causes
    if found:
        top = next(c for c in _flagged(a)[9].causes if c.cause == "thp-fallback")
        assert top.evidence["page_policy"] == policy


def test_an_emulated_node_is_inconclusive_whatever_its_runs_say():
    """Issue 27: under qemu-user the timings are the emulator's; the node is never judged degraded."""
    window = {k: Trial(slowdown=0.41, others=0.43, corunners=STRESS) for k in range(13, 22)}
    host = "emulated aarch64 on Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    facts = {"virtualization": "none", "facts": json.dumps({"emulation": host})}
    a = analyze_ensemble(ensemble(window, facts=facts))
    n1 = _node(a)
    assert n1.verdict == "inconclusive" and a.verdict.state == "inconclusive"
    assert n1.reasons[0].startswith(f"{host}: the timings are the emulator's")
    native = analyze_ensemble(ensemble(window, facts={"virtualization": "none", "facts": "{}"}))
    assert _node(native).verdict == "degraded"  # the same runs on a native node are judged
