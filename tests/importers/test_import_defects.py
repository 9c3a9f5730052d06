"""Defects of the importers found by attack (issue "leave the node as it was found"): node names with control
characters were accepted, and the same file imported by several processes at once was stored several times
(the "already imported" check ran outside the campaign lock and the commit did not repeat it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.store.errors import StoreError
from tailscope.store.load import load_into
from tailscope.store.views import connect

FIXTURES = Path(__file__).parent / "fixtures"
XHPL = FIXTURES / "xhpl-2.3-three-runs.out"


def stored_runs(campaign: Path) -> list[tuple]:
    con = connect(campaign)
    try:
        return con.execute("SELECT node, variant, trial FROM runs ORDER BY node, variant, trial").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(
    ("node", "shown"),
    [("c1\x1b[2Jc2", r"'c1\x1b[2Jc2'"), ("c1\u202ec2", r"'c1\u202ec2'"), ("c\x00", r"'c\x00'")],
)
def test_node_names_with_control_characters_are_refused_at_import(tmp_path, capsys, node, shown):
    csv = tmp_path / "it.csv"
    csv.write_text(f"node,run,iteration,value,unit\nc0,r1,0,1.0,s\n{node},r1,0,2.0,s\n")
    campaign = tmp_path / "c"
    assert main(["import", "iterations", str(csv), "--campaign", str(campaign)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tailscope: error: {csv}:3: node name {shown} holds the "), err
    assert not campaign.exists()


def test_a_node_name_with_a_newline_is_refused(tmp_path, capsys):
    csv = tmp_path / "it.csv"
    csv.write_text('node,run,iteration,value,unit\n"c1\nc2",r1,0,2.0,s\n')
    assert main(["import", "iterations", str(csv), "--campaign", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node name 'c1\\nc2' holds the control character U+000A" in err[0], err
    for args in (["hpl", str(XHPL)], ["iterations", str(csv)]):
        assert main(["import", *args, "--campaign", str(tmp_path / "d"), "--node", "n1\nn2"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            "tailscope: error: --node: node name 'n1\\nn2' holds the control character U+000A (expected a "
            "host name: letters, digits, '.', '-', '_')"
        ]
    assert not (tmp_path / "d").exists()


def test_a_duplicate_staged_meanwhile_is_refused_at_commit(tmp_path):
    """Two imports of one file that both passed the check: the second to commit is refused, nothing staged
    by it stays."""
    campaign = tmp_path / "c"
    assert main(["import", "iterations", str(_csv(tmp_path)), "--campaign", str(campaign)]) == 0
    import pyarrow as pa

    from tailscope.store.schema import TABLES

    def stage(load, trial: int) -> None:
        load.record_source("ab" * 32, "same.out")
        row = {"run_id": f"r{trial}", "campaign": load.campaign_id, "node": "n1", "probe": "p",
               "variant": "p", "params": "{}", "trial": trial, "started_at": _now(), "metric": "m",
               "value": 1.0, "unit": "s", "higher_is_better": False, "status": "ok", "source": "import:test",
               "task": load.txid}  # fmt: skip
        load.write("runs", pa.Table.from_pylist([row], schema=TABLES["runs"].schema), node="n1")

    with load_into(campaign, "first") as first:
        stage(first, 0)
        refused = pytest.raises(StoreError, match=r"^same.out: already imported into .* \(first, ")
        with refused, load_into(campaign, "second") as second:
            stage(second, 1)
            first.commit()
    assert [r for r in stored_runs(campaign) if r[1] == "p"] == [("n1", "p", 0)]
    assert not list((campaign).rglob("*staging*/*/*.parquet"))


def _now():
    from tailscope.store.campaign import utcnow

    return utcnow()


def _csv(tmp_path: Path) -> Path:
    path = tmp_path / "base.csv"
    path.write_text("node,run,iteration,value,unit\nn0,r0,0,1.0,s\n")
    return path


@pytest.mark.parametrize("format", ["hpl", "iterations"])
def test_the_same_file_imported_six_times_at_once_is_stored_once(tmp_path, format):
    """Six real processes import one file into one campaign at the same moment: one stores it, five exit 2
    with one line each."""
    if format == "hpl":
        source, extra = XHPL, ["--node", "n1"]
    else:
        source = tmp_path / "it.csv"
        rows = "".join(f"n1,r{i},0,{i + 1}.0,s\n" for i in range(5))
        source.write_text("node,run,iteration,value,unit\n" + rows)
        extra = ["--name", "same"]
    campaign = tmp_path / "c"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    go = tmp_path / "go"
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.005)\n"
        "from tailscope.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    cmd = [sys.executable, "-c", script, "import", format, str(source), "--campaign", str(campaign), *extra]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(6)]  # fmt: skip
    import time

    time.sleep(3.0)  # every process has imported tailscope and waits for the start
    go.touch()
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2, 2, 2, 2, 2], results
    for rc, _out, err in results:
        if rc == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and ("already imported" in lines[0] or "already holds" in lines[0]), err
    expected = 3 if format == "hpl" else 5
    assert len(stored_runs(campaign)) == expected


def test_every_program_format_is_an_import_format():
    from tailscope.importers.cli import FORMATS
    from tailscope.importers.reader import PROGRAM_FORMATS

    assert set(PROGRAM_FORMATS) <= set(FORMATS)
    assert {"iterations", "perfcounts", "perf-csv", "likwid-csv"} <= set(FORMATS)


def _peak_mib(args: list[str]) -> float:
    """Peak RSS (MiB) of one `tailscope` process (wait4's rusage), which must succeed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-m", "tailscope", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read() if proc.stderr else ""
    return usage.ru_maxrss / 1024


@pytest.mark.slow
def test_iterations_import_memory_does_not_follow_the_number_of_runs(tmp_path):
    """2 M one-iteration runs (49 MB) peaked at 4.35 GB: a Python accumulator and a runs-row dict per run.
    500,000 runs must cost less than 256 MiB above a one-run import of the same shape (measured in this test);
    bench/bench_import_memory.py prints 1, 2 and 4 M runs."""
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    small.write_text("node,run,iteration,value\nc0000,r0,0,1.5\n")
    with open(large, "w") as out:
        out.write("node,run,iteration,value\n")
        out.write("".join(f"c{i % 64:04d},r{i},0,{1.0 + (i % 97) / 100:.2f}\n" for i in range(500_000)))
    base = _peak_mib(["import", "iterations", str(small), "--campaign", str(tmp_path / "s"),
                      "--lower-is-better"])
    peak = _peak_mib(["import", "iterations", str(large), "--campaign", str(tmp_path / "l"),
                      "--lower-is-better"])
    assert peak - base < 256, (base, peak)
    con = connect(tmp_path / "l")
    try:
        runs = con.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone()
        assert runs == (500_000, 500_000)
        assert con.execute("SELECT count(*) FROM iterations").fetchone() == (500_000,)
    finally:
        con.close()
