"""tsmon, the background monitor: streaming samples survive SIGTERM, SIGKILL and a full file system, an
event that cannot be opened on some CPU is reported and skipped, and trials are cut from the samples."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from counter_tools import tool

from tailscope.counters import monitor
from tailscope.counters.eventsets import find
from tailscope.store.campaign import Campaign
from tailscope.store.load import load_into
from tailscope.store.views import connect

SOFTWARE = str(find("software"))


def start(out: Path, *args: str) -> subprocess.Popen:
    argv = [str(tool("tsmon")), "-o", str(out), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_samples(out: Path, n: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists() and out.read_bytes().count(b'"record":"sample"') >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{out}: fewer than {n} samples after {timeout} s")


def lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_sigterm_flushes_and_closes(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = start(out, "--interval", "10ms", "--events", SOFTWARE)
    wait_samples(out, 5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0, proc.stderr.read()
    recs = lines(out)
    assert recs[0]["record"] == "header" and recs[-1]["record"] == "end"
    assert recs[-1]["reason"] == "SIGTERM"
    mf = monitor.read(out)
    assert not mf.torn_tail and mf.end is not None
    assert mf.end["samples"] == len(mf.sample) >= 5
    assert list(mf.sample) == list(range(len(mf.sample)))
    assert np.all(np.diff(mf.t_ns) > 0) and np.all(np.diff(mf.tsc.astype(np.int64)) > 0)
    # software counters are cumulative and nondecreasing
    for i, s in enumerate(mf.series):
        if s["kind"] == "counter":
            v = mf.values[:, i][~np.isnan(mf.values[:, i])]
            assert np.all(np.diff(v) >= 0), s


def test_sigint_too(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = start(out, "--interval", "20ms")
    wait_samples(out, 2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0
    assert monitor.read(out).end["reason"] == "SIGINT"


def test_sigkill_loses_at_most_the_last_interval(tmp_path):
    out = tmp_path / "m.jsonl"
    interval = 0.02
    proc = start(out, "--interval", "20ms", "--events", SOFTWARE)
    wait_samples(out, 10)
    time.sleep(0.15)
    killed_at = time.time_ns()
    proc.kill()
    proc.wait(timeout=10)
    raw = out.read_bytes()
    assert raw.endswith(b"\n")  # every sample is one write: no torn line
    mf = monitor.read(out)
    assert mf.end is None and not mf.torn_tail
    assert list(mf.sample) == list(range(len(mf.sample)))
    # the newest sample on disk is no older than one interval (plus scheduling slack) before the kill
    assert killed_at - int(mf.t_ns[-1]) < 3 * interval * 1e9
    assert len(mf.sample) >= 10


def test_event_that_cannot_be_opened_on_some_cpu(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("system-wide per-CPU perf events need root or perf_event_paranoid <= 0")
    out = tmp_path / "m.jsonl"
    online = os.sched_getaffinity(0)
    missing = max(online) + 40  # a CPU this machine does not have
    cpus = f"{min(online)},{missing}"
    proc = subprocess.run(
        [
            str(tool("tsmon")),
            "-o",
            str(out),
            "--interval",
            "10ms",
            "--duration",
            "0.1",
            "--cpus",
            cpus,
            "--events",
            "tc=task-clock;cs=context-switches;st=proc:stat:user",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    mf = monitor.read(out)
    assert any(f"CPU {missing}" in w for w in mf.warnings), mf.warnings
    assert f"CPU {missing}" in proc.stderr
    perf = [(s["event"], s["unit"]) for s in mf.series if s["source"] == "perf"]
    assert sorted(perf) == [("cs", min(online)), ("tc", min(online))]
    tc = mf.values[:, next(i for i, s in enumerate(mf.series) if s["event"] == "tc")]
    assert np.all(np.diff(tc) > 0)  # the CPU that exists is counted
    st_missing = [i for i, s in enumerate(mf.series) if s["event"] == "st" and s["unit"] == missing]
    assert all(np.isnan(mf.values[:, i]).all() for i in st_missing)  # read as null, file still whole


def test_full_file_system(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    rc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mnt)], capture_output=True)
    if rc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {rc.stderr.decode().strip()}")
    try:
        out = mnt / "m.jsonl"
        proc = subprocess.run(
            [
                str(tool("tsmon")),
                "-o",
                str(out),
                "--interval",
                "1ms",
                "--events",
                SOFTWARE,
                "--duration",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3, proc.stderr
        assert "No space left on device" in proc.stderr and "last whole line" in proc.stderr
        assert proc.stderr.count("error:") == 1
        raw = out.read_bytes()
        assert raw.endswith(b"\n")
        mf = monitor.read(out)
        assert not mf.torn_tail and len(mf.sample) >= 1
        assert list(mf.sample) == list(range(len(mf.sample)))
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_command_mode_exit_status(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = subprocess.run(
        [str(tool("tsmon")), "-o", str(out), "--interval", "10ms", "--", "sh", "-c", "sleep 0.08; exit 7"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 7
    mf = monitor.read(out)
    assert mf.end["reason"] == "command exited" and len(mf.sample) >= 3


def test_bad_options(tmp_path):
    for args in (["--interval", "0.1ms"], ["--interval", "fast"], ["--cpu", "x"], []):
        argv = [str(tool("tsmon")), *(["-o", str(tmp_path / "x")] if args else []), *args]
        proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "tsmon: error:" in proc.stderr


def synthetic(tmp_path: Path, t_s: list[float], series: list[dict], values: list[list[float | None]]) -> Path:
    t0 = 1_700_000_000_000_000_000
    out = tmp_path / "syn.jsonl"
    recs = [{"record": "header", "format": "tailscope-monitor", "node": "n1", "interval_ns": 10**9}]
    recs += [{"record": "series", "index": i, **s} for i, s in enumerate(series)]
    recs += [
        {"record": "sample", "sample": k, "tsc": 1000 + k, "t_ns": t0 + int(t * 1e9), "values": v}
        for k, (t, v) in enumerate(zip(t_s, values, strict=True))
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return out


def test_cut_attributes_by_overlap(tmp_path):
    series = [
        {"source": "perf", "pmu": "software", "unit": 0, "event": "lin", "width": 64, "kind": "counter"},
        {"source": "proc", "pmu": "proc_stat", "unit": 0, "event": "step", "width": 64, "kind": "counter"},
        {"source": "perf", "pmu": "x", "unit": 1, "event": "w32", "width": 32, "kind": "counter"},
        {"source": "sysfs", "pmu": "cpufreq", "unit": 0, "event": "khz", "width": 64, "kind": "gauge"},
    ]
    t = [0.0, 1.0, 2.0, 3.0]
    wrap = 2**32
    vals = [[0, 0, wrap - 100, 2e6], [1000, 0, wrap - 50, 2e6], [2000, 600, 50, 2e6], [3000, 600, 150, 2e6]]
    mf = monitor.read(synthetic(tmp_path, t, series, vals))
    t0 = int(mf.t_ns[0])
    trials = [
        ("a", t0 + int(0.5e9), t0 + int(2.5e9)),  # straddles two boundaries
        ("b", t0 + int(1.25e9), t0 + int(1.75e9)),  # inside one interval
        ("c", t0 - 1, t0 + int(1e9)),  # starts before the first sample: not cut
    ]
    rows = {(r["run_id"], r["event"]): r["value"] for r in monitor.cut_trials(mf, trials)}
    assert rows[("a", "lin")] == pytest.approx(2000.0)
    assert rows[("a", "step")] == pytest.approx(600.0)  # the whole 1-2 s increment lies inside a
    assert rows[("b", "step")] == pytest.approx(300.0)  # half of the interval's increment
    assert rows[("b", "lin")] == pytest.approx(500.0)
    assert rows[("a", "w32")] == pytest.approx(25 + 100 + 50)  # across the 32-bit wrap
    assert not any(k[0] == "c" for k in rows) and not any(k[1] == "khz" for k in rows)


def test_torn_tail_and_bad_lines(tmp_path):
    series = [
        {"source": "perf", "pmu": "software", "unit": 0, "event": "lin", "width": 64, "kind": "counter"}
    ]
    f = synthetic(tmp_path, [0.0, 1.0], series, [[1], [2]])
    f.write_bytes(f.read_bytes() + b'{"record":"sample","sample":2,"ts')
    mf = monitor.read(f)
    assert mf.torn_tail and len(mf.sample) == 2
    f.write_bytes(f.read_bytes().replace(b'"sample": 1,', b'"sample": 5,', 1))
    with pytest.raises(monitor.MonitorInputError, match=r"syn.jsonl:\d+: sample 5 follows sample 0"):
        monitor.read(f)
    f.write_text('{"record":"header","format":"tailscope-monitor"}\nnot json\n')
    with pytest.raises(monitor.MonitorInputError, match=r"syn.jsonl:2: not a JSON line"):
        monitor.read(f)


def test_store_samples_round_trip(tmp_path):
    series = [
        {"source": "perf", "pmu": "software", "unit": 0, "event": "lin", "width": 64, "kind": "counter"},
        {"source": "proc", "pmu": "vmstat", "unit": None, "event": "thp_fault_alloc", "width": 64},
    ]
    mf = monitor.read(synthetic(tmp_path, [0.0, 1.0, 2.0], series, [[1, 5], [2, None], [3, 7]]))
    with load_into(tmp_path / "c", "test", create=True) as load:
        assert monitor.store_samples(mf, load) == 5  # the null read is not a row
    con = connect(Campaign.open(tmp_path / "c"))
    got = con.execute("SELECT sample, event, unit, value FROM samples ORDER BY sample, event").fetchall()
    assert got[0] == (0, "lin", 0, 1.0) and (1, "thp_fault_alloc", None, 5.0) not in got
    assert pa.Table  # pyarrow imported for the shard schema


def test_monitor_verb_stores_samples(tmp_path, capsys):
    from tailscope.cli import main

    camp = tmp_path / "c"
    assert main(["monitor", "--interval", "20ms", "--campaign", str(camp), "--", "sleep", "0.15"]) == 0
    con = connect(Campaign.open(camp))
    n, series = con.execute("SELECT count(DISTINCT sample), count(DISTINCT event) FROM samples").fetchone()
    assert n >= 5 and series >= 4  # the default software events
    assert main(["monitor", "--interval", "0.5ms", "-o", str(tmp_path / "x")]) == 2
    assert "shortest interval is 1ms" in capsys.readouterr().err


def test_the_monitor_verb_runs_through_main(tmp_path, capsys):
    """`tailscope monitor ...` through the command line's main: its COMMAND positional and the verb's own
    name were one `command` attribute, so every monitor command died with TypeError: unhashable type:
    'list' before it started (issue 23)."""
    from tailscope.cli import main

    out = tmp_path / "m.jsonl"
    code = main(["monitor", "--interval", "10ms", "-o", str(out), "--", "sh", "-c", "sleep 0.05; exit 3"])
    assert code == 3  # the command's status, passed on
    mf = monitor.read(out)
    # the command runs under the one launcher (its tree dies with tailscope) and tsmon beside it, stopped
    # once the command has exited: its end record says it was stopped (SIGTERM), after at least two samples
    assert mf.end["reason"] == "SIGTERM" and len(mf.sample) >= 2
    assert f"monitor: {out}" in capsys.readouterr().err
    assert main(["monitor", "--campaign", str(tmp_path / "c"), "--duration", "0.05"]) == 0
    assert "stored" in capsys.readouterr().err
    assert main(["monitor"]) == 2 and "give -o FILE or --campaign DIR" in capsys.readouterr().err
