"""`tailscope jobs collect` end to end through the command line: a sacct dump stored once however often it is
collected, a requeued job replaced by its last run, bad input as one line and exit 2 with nothing stored,
incremental collection from the last collected end time, and the same answer from a directory history and
from PostgreSQL."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.jobs.store import open_jobs

sys.path.insert(0, str(Path(__file__).parent))
from fleet import SACCT_HEADER, make_fleet, write_sacct


@pytest.fixture(scope="module")
def fleet():
    return make_fleet(nodes=48, jobs=900, days=21, classes=6, slow={10: 0.12}, max_size=4, seed=4)


def test_collect_twice_stores_each_job_once_and_a_requeue_replaces_it(tmp_path, fleet, capsys):
    dump = write_sacct(fleet.rows, tmp_path / "sacct.txt")
    history = tmp_path / "H"
    assert main(["jobs", "collect", str(history), "--sacct-file", str(dump)]) == 0
    assert main(["jobs", "collect", str(history), "--sacct-file", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "900 jobs added" in out and "nothing added: its 900 jobs are already stored" in out
    rows = [dict(r) for r in fleet.rows[:3]]
    rows[0].update(nodelist="c47", elapsed_s=rows[0]["elapsed_s"] + 60)  # job 1000 ran again elsewhere
    assert (
        main(["jobs", "collect", str(history), "--sacct-file", str(write_sacct(rows, tmp_path / "r.txt"))])
        == 0
    )
    assert "0 jobs added, 1 updated (requeued or changed), 2 already stored" in capsys.readouterr().out
    jobs, damaged = open_jobs(history).read_jobs()
    assert damaged == [] and len(jobs) == 900
    assert jobs.set_index("job_id").loc["1000", "nodelist"] == "c47"


def test_bad_input_is_one_line_exit_2_and_nothing_is_stored(tmp_path, fleet, capsys):
    history = tmp_path / "H"
    good = write_sacct(fleet.rows[:50], tmp_path / "good.txt")
    assert main(["jobs", "collect", str(history), "--sacct-file", str(good)]) == 0
    before = sorted(p.relative_to(history) for p in history.rglob("*"))
    lines = good.read_text().splitlines()
    lines[40] = lines[40].replace("COMPLETED", "COMPLETED!")
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    for argv in (["--sacct-file", str(bad)], ["--sacct-file", str(tmp_path / "missing.txt")]):
        assert main(["jobs", "collect", str(history), *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("tailscope: error: "), err
    with pytest.raises(SystemExit) as exit_:  # an option argparse refuses: its usage, then one error line
        main(["jobs", "collect", str(history), "--sacct-file", str(good), "--since", "last tuesday"])
    assert exit_.value.code == 2
    assert "argument --since: 'last tuesday': expected a date" in capsys.readouterr().err.splitlines()[-1]
    assert sorted(p.relative_to(history) for p in history.rglob("*")) == before
    main(["jobs", "collect", str(history), "--sacct-file", str(bad)])
    assert f"{bad}:41: State: expected a Slurm state" in capsys.readouterr().err


def _stand_in_sacct(directory: Path, dump: Path) -> Path:
    """A `sacct` on PATH that records its arguments and environment and prints `dump` with the delimiter it
    is given, as sacct does (the live command line is run against real slurmdbd by the accounting cluster's
    test; this one checks what collect asks for)."""
    script = directory / "sacct"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"open({str(directory / 'argv')!r}, 'w').write('\\n'.join(sys.argv[1:]))\n"
        f"open({str(directory / 'env')!r}, 'w').write("
        "f\"TZ={os.environ.get('TZ')} FORMAT={os.environ.get('SLURM_TIME_FORMAT')}\")\n"
        "d = sys.argv[sys.argv.index('--delimiter') + 1] if '--delimiter' in sys.argv else '|'\n"
        f"sys.stdout.write(open({str(dump)!r}).read().replace('|', d))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_live_collect_asks_sacct_for_every_state_in_utc_from_the_last_end_less_a_day(
    tmp_path, fleet, monkeypatch, capsys
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in_sacct(bin_dir, write_sacct(fleet.rows[:100], tmp_path / "d.txt"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SACCT_FORMAT", "JobID")  # a user's sacct default must not change what collect reads
    history = tmp_path / "H"
    assert main(["jobs", "collect", str(history), "--since", "2026-09-01"]) == 0
    argv = (bin_dir / "argv").read_text().split("\n")
    delimiter = argv.pop(argv.index("--delimiter") + 1)
    argv.remove("--delimiter")
    assert len(delimiter) == 18 and delimiter[0] == delimiter[-1] == "\x1f"
    assert not set(delimiter) & set("|%\\\n") and not any(c.isalnum() for c in delimiter)
    assert argv[:8] == [
        "--parsable2",
        "--allocations",
        "--allusers",
        "--starttime",
        "2026-09-01T00:00:00",
        "--endtime",
        "now",
        "--format",
    ]
    assert argv[8] == SACCT_HEADER.replace("|", ",")
    assert (bin_dir / "env").read_text().strip() == "TZ=UTC FORMAT=standard"
    last = max(r["end_at"] for r in fleet.rows[:100])
    assert main(["jobs", "collect", str(history), "--cluster", "synth"]) == 0
    argv = (bin_dir / "argv").read_text().split("\n")
    assert argv[argv.index("--delimiter") + 1] != delimiter  # new for each run
    start = argv[argv.index("--starttime") + 1]
    assert start == (last - __import__("datetime").timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert argv[argv.index("--clusters") + 1] == "synth"
    out = capsys.readouterr().out
    assert "100 jobs added" in out and "nothing added: its 100 jobs are already stored" in out


def test_sacct_that_fails_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "sacct"
    script.write_text(
        "#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert main(["jobs", "collect", str(tmp_path / "H")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "tailscope: error: sacct failed (exit 1): sacct: error: Problem talking to the database: "
        "Connection refused"
    ]
    assert not (tmp_path / "H").exists()


psycopg = pytest.importorskip("psycopg")


def test_postgresql_stores_the_same_jobs_and_answers_the_same(postgres_server, tmp_path, fleet, capsys):
    from pgserver import fresh_database

    url = fresh_database(postgres_server, "jobs")
    dump = write_sacct(fleet.rows, tmp_path / "sacct.txt")
    answers = []
    for location in (url, str(tmp_path / "H")):
        assert main(["jobs", "collect", location, "--sacct-file", str(dump)]) == 0
        assert main(["jobs", "collect", location, "--sacct-file", str(dump)]) == 0
        assert "nothing added: its 900 jobs are already stored" in capsys.readouterr().out
        code = main(["jobs", "show", location, "--json"])
        answers.append((code, json.loads(capsys.readouterr().out)))
    assert answers[0] == answers[1]
    code, body = answers[0]
    assert code == 1 and body["verdict"] == "degraded"
    assert [n["node"] for n in body["nodes"] if n["q"] < 0.05 and n["effect"] > 0] == [fleet.nodes[10]]
