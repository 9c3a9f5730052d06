"""Event-set files: the shipped sets parse, their formulas name declared counters, errors name file:line,
users' own directories come first, and the native library reads the same files (EVENTS section)."""

from __future__ import annotations

import pytest
from counter_tools import tsevents

from tailscope.counters import eventsets
from tailscope.counters.eventsets import EventSetError

SHIPPED = ("software", "skx", "icx", "spr", "zen", "armv8", "kp920")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sets_parse(name):
    es = eventsets.load(name)
    assert es.short and es.events and es.metrics and es.long
    names = {e.name for e in es.events}
    for m in es.metrics:
        from tailscope.counters.derived import names_in

        assert names_in(m.formula) <= names | {"time"}, m


def test_software_set_covers_the_issue():
    specs = {e.spec for e in eventsets.load("software").events}
    for needed in (
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "minor-faults",
        "major-faults",
        "rusage:nvcsw",
        "rusage:nivcsw",
        "proc:stat:steal",
        "proc:stat:irq",
        "proc:stat:softirq",
        "proc:interrupts",
        "proc:vmstat:thp_*",
        "proc:vmstat:compact_*",
        "proc:vmstat:numa_*",
        "sysfs:cpufreq:scaling_cur_freq",
        "sysfs:thermal:temp",
    ):
        assert needed in specs


def test_skx_set_resolves_fully_on_the_skx_fixture(skx_sysfs):
    path = eventsets.find("skx")
    records = tsevents("load", str(path), sysfs=skx_sysfs)
    skipped = [r["message"] for r in records if r["record"] == "skipped"]
    assert not skipped
    events = {r["name"]: r for r in records if r["record"] == "event"}
    assert len(events) == len(eventsets.load("skx").events)
    assert events["sf_evict_m"]["perf"][23] == "uncore_cha_23/event=0x3d,umask=0x1/"
    assert events["cas_reads"]["perf"][0] == "uncore_imc_0/event=0x4,umask=0x3/"
    assert events["energy_pkg"]["resolved_by"] == "sysfs-alias"


def test_kp920_set_resolves_on_the_kunpeng_fixture():
    """Issue 27: PMUv3 core events, and HiSilicon uncore units by perf sysfs names on every die."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "sysfs-kp920"
    records = tsevents("load", str(eventsets.find("kp920")), sysfs=fixture)
    assert not [r["message"] for r in records if r["record"] == "skipped"]
    events = {r["name"]: r for r in records if r["record"] == "event"}
    assert len(events) == len(eventsets.load("kp920").events)
    assert events["cpu_cycles"]["resolved_by"] == "raw" and events["cpu_cycles"]["config"] == "0x11"
    ddrc = events["ddrc_flux_rd"]
    assert ddrc["family"] == "hisi_ddrc" and ddrc["resolved_by"] == "sysfs-alias"
    assert ddrc["perf"] == [f"hisi_sccl{s}_ddrc{n}/event=0x1/" for s in (1, 3) for n in range(4)]
    assert events["l3c_rd_hit_cpipe"]["perf"][-1] == "hisi_sccl3_l3c5/event=0x2/"


def test_software_set_resolves_here():
    records = tsevents("load", str(eventsets.find("software")), sysfs=None)
    assert not [r for r in records if r["record"] == "skipped"]
    perf = [r for r in records if r["record"] == "event" and r["kind"] == "perf"]
    assert {r["name"] for r in perf} >= {"task_clock", "context_switches", "cpu_migrations", "page_faults"}


@pytest.mark.parametrize(
    ("text", "line", "expect"),
    [
        ("EVENTS\nx task-clock\nx cycles\n", 3, "already defined on line 2"),
        ("EVENTS\nx\n", 2, "expected NAME EVENT"),
        ("EVENTS\n9x task-clock\n", 2, "letters, digits"),
        ("EVENTS\nx task-clock per=core\n", 2, "per=cpu|socket|unit|node"),
        ("EVENTS\nx proc:stat:bogus\n", 2, "proc:stat:FIELD"),
        ("EVENTS\nx rusage:foo\n", 2, "rusage:"),
        ("EVENTS\nx uncore_cha/event=1\n", 2, "perf syntax"),
        ("EVENTS\nx cpu@12\n", 2, "PMU@0xHEX"),
        ("EVENTS\nx task-clock\nMETRICS\ny = x * z\n", 4, "unknown name(s) z"),
        ("EVENTS\nx task-clock\nMETRICS\ny = __import__('os')\n", 4, "only min"),
        ("EVENTS\nx task-clock\nMETRICS\ny x\n", 4, "NAME = FORMULA"),
        ("x task-clock\n", 1, "section line"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, expect):
    f = tmp_path / "mine.txt"
    f.write_text(text)
    with pytest.raises(EventSetError) as err:
        eventsets.load(str(f))
    assert str(err.value).startswith(f"{f}:{line}:"), err.value
    assert expect in str(err.value)


def test_native_reader_names_the_same_line(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text("SHORT x\nEVENTS\nok task-clock\nbad uncore_nope/event=1/\n")
    import subprocess

    from counter_tools import tool

    proc = subprocess.run([str(tool("tsevents")), "load", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0  # load skips what this machine cannot resolve, and says so
    assert f"{f}:4: uncore_nope/event=1/: no PMU uncore_nope" in proc.stdout


def test_user_directories_come_first(tmp_path, monkeypatch):
    (tmp_path / "software.txt").write_text("SHORT mine\nEVENTS\ntc task-clock\n")
    (tmp_path / "extra.txt").write_text("SHORT extra\nEVENTS\ncs context-switches\nMETRICS\nr = cs / time\n")
    monkeypatch.setenv("TAILSCOPE_EVENTSETS", str(tmp_path))
    assert eventsets.find("software") == tmp_path / "software.txt"
    assert eventsets.load("extra").metrics[0].formula == "cs / time"
    assert "skx" in eventsets.available()
    with pytest.raises(EventSetError, match="no set of that name"):
        eventsets.find("nope")
