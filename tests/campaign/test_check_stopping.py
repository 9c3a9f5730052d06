"""`check` and `run --until-settled` stopping for real on this node (issue 33): the options, the stopping
record, what is stored and claimed. Whether this busy or quiet machine settles is not asserted: what it
says has to agree with how it stopped."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from store_tools import add_as_healthy
from tailscope.campaign.stopping import read_record
from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.read import connect

TAILSCOPE = [sys.executable, "-m", "tailscope"]
NHC = Path(__file__).resolve().parents[2] / "scripts" / "nhc" / "tailscope.nhc"


def tailscope(*args: str) -> subprocess.CompletedProcess[str]:
    """`tailscope ARGS` in a fresh process, without the caller's $TAILSCOPE_HISTORY."""
    env = {k: v for k, v in os.environ.items() if k != "TAILSCOPE_HISTORY"}
    return subprocess.run([*TAILSCOPE, *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["check", "--fixed", "--budget", "20s"], "--fixed runs the fixed trial counts"),
        (["check", "--fixed", "--between-jobs"], "not with --between-jobs"),
        (["check", "--between-jobs"], "--between-jobs judges the node against its own history"),
        (["check", "--budget", "0.5"], "expected a time > 1 s"),
        (["check", "--budget", "soon"], "expected a time like 20s"),
        (["check", "--max-level-drop", "2"], "--max-level-drop"),
        (["run", "l2sum", "--trials", "3", "--until-settled", "--scaling"], "--until-settled: not with"),
    ],
)
def test_stopping_options_are_checked_before_anything_runs(argv, words, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TAILSCOPE_HISTORY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing created


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A history with this node's l2sum: 8 fixed trials, added as a healthy entry (on a busy machine they
    are judged inconclusive, which is no baseline)."""
    root = tmp_path_factory.mktemp("history")
    campaign, history = root / "base", root / "h"
    run = tailscope("run", "l2sum", "--trials", "8", "--no-progress", "--campaign", str(campaign))
    assert run.returncode in (0, 1), run.stderr
    add_as_healthy(history, campaign)
    return history


@pytest.mark.slow
def test_run_until_settled_stops_and_records_how(history, tmp_path):
    campaign = tmp_path / "c"
    proc = tailscope("run", "l2sum", "--trials", "40", "--until-settled", "--history", str(history),
                     "--no-progress", "--campaign", str(campaign))  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    record = read_record(campaign)
    assert record is not None and record.mode == "settled" and list(record.caps.values()) == [40]
    assert [b.source for b in record.baselines.values()] == ["history"]
    with connect(Campaign.open(campaign)) as con:
        stored = len(con.runs())
    assert 1 <= stored <= 40
    assert Campaign.open(campaign).manifest.planned_trials() == dict.fromkeys(record.caps, stored)
    analysis = json.loads(tailscope("analyze", str(campaign), "--json").stdout)
    verdict = analysis["nodes"][0]["verdict"]
    levels = [c for c in analysis["claims"] if c["kind"] == "level"]
    if record.reason == "every probe settled":  # stopped as settled: the level has its claim
        assert stored < 40 and levels and levels[0]["relation"] == "within"
    if "too busy" in record.reason:
        assert verdict == "inconclusive"
    if verdict == "healthy":
        assert levels and levels[0]["relation"] == "within"
    if stored > 5:  # slow runs are counted from the 6th trial: a bound on their rate
        assert any(c["kind"] == "slow_rate" for c in analysis["claims"])
    assert "stopped after" in proc.stdout and record.reason in proc.stdout


@pytest.mark.slow
def test_check_within_a_budget_says_what_it_claims(history, tmp_path):
    campaign = tmp_path / "c"
    proc = tailscope(
        "check", "--budget", "4s", "--json", "--history", str(history), "--campaign", str(campaign)
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    out = json.loads(proc.stdout)
    assert out["exit"] == proc.returncode and out["verdict"] in ("healthy", "degraded", "inconclusive")
    stop = out["stopping"]
    assert stop["mode"] == "budget" and stop["budget_s"] == 4.0 and stop["seconds"] <= 4.0 + 1.0
    for claim in out["claims"]:
        assert set(claim) >= {"probe", "kind", "relation", "bound", "confidence", "text"}
        assert claim["kind"] in ("level", "slow_rate") and 0 <= claim["bound"] <= 1
    if out["verdict"] == "healthy":  # never healthy without a claim
        assert any(c["kind"] == "level" and c["relation"] == "within" for c in out["claims"])
    assert (campaign / "report.html").is_file()
    appended = [line for line in proc.stderr.splitlines() if line.startswith(f"history {history}")]
    assert appended, proc.stderr


@pytest.mark.slow
def test_between_jobs_answers_as_nhc_expects(history, tmp_path):
    campaign = tmp_path / "c"
    argv = (
        "check",
        "--between-jobs",
        "--budget",
        "3s",
        "--history",
        str(history),
        "--campaign",
        str(campaign),
    )
    proc = tailscope(*argv)
    assert proc.returncode in (0, 1, 3), proc.stderr
    lines = proc.stdout.splitlines()
    if proc.returncode == 0:
        assert lines == []  # nothing when healthy
    elif proc.returncode == 1:
        assert len(lines) == 1 and lines[0].startswith(
            "ERROR:  nhc:  Health check failed:  check_tailscope: "
        )
    else:
        assert lines == [] and ": inconclusive: " in proc.stderr
    assert not (campaign / "report.html").exists()  # no report unless asked
    assert read_record(campaign) is not None and read_record(campaign).budget_s == 3.0  # type: ignore[union-attr]
    assert "entries added" in proc.stderr  # the history appended


@pytest.mark.slow
def test_nhc_check_between_jobs_dies_only_when_degraded(history, tmp_path):
    """scripts/nhc/tailscope.nhc's check_tailscope_between_jobs, sourced in bash with NHC's die and log: its
    budget is NHC's TIMEOUT less the margin and start-up; healthy passes silently, inconclusive only logs."""
    campaign = tmp_path / "c"
    script = "\n".join(
        [
            'die() { local rc="$1"; shift; echo "DIE[$rc]: $*"; return "$rc"; }',
            'log() { echo "LOG: $*"; }',
            f"TAILSCOPE={shlex.quote(sys.executable)}' -m tailscope'",
            "TIMEOUT=20",
            f"source {shlex.quote(str(NHC))}",
            f"check_tailscope_between_jobs {shlex.join([str(history), '--campaign', str(campaign)])}",
            'echo "RC=$?"',
        ]
    )
    env = {k: v for k, v in os.environ.items() if k != "TAILSCOPE_HISTORY"}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stdout.strip().splitlines()
    record = read_record(campaign)
    assert record is not None and record.budget_s == 5.0  # NHC TIMEOUT 20 - margin 5 - start-up 10
    if lines[-1] == "RC=1":
        assert lines[0].startswith("DIE[1]: check_tailscope_between_jobs:  ")
    else:
        assert lines[-1] == "RC=0" and not any(line.startswith("DIE") for line in lines)
        assert all(line.startswith("LOG: check_tailscope_between_jobs:  inconclusive") for line in lines[:-1])
