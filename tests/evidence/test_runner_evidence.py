"""`tailscope run` stores the evidence rows by default and none with --no-evidence."""

from __future__ import annotations

from pathlib import Path

from store_tools import stored
from tailscope.cli import main

FAST = ["--chunk-bytes", "256k", "--sums", "40", "--sums-per-iteration", "4", "--cpus", "0", "--no-pages"]


def os_rows(campaign: Path) -> list[tuple]:
    return stored(
        campaign,
        "SELECT r.trial, c.pmu, c.unit, c.event, c.value FROM counters c JOIN runs r USING (run_id) "
        "WHERE c.source = 'os' ORDER BY r.trial",
    )


def test_evidence_is_stored_by_default_and_not_with_no_evidence(tmp_path, capsys):
    on, off = tmp_path / "on", tmp_path / "off"
    assert main(["run", "l2sum", "--trials", "3", "--campaign", str(on), "--no-progress", *FAST]) == 0
    rows = os_rows(on)
    assert {r[0] for r in rows} == {0, 1, 2}  # every trial
    for trial in (0, 1, 2):
        events = {(r[1], r[2], r[3]) for r in rows if r[0] == trial}
        assert {("cpu", 0, "others_s"), ("cpu", 0, "user_s"), ("task", 0, "run_delay_s")} <= events
        assert ("trial", None, "wall_s") in events
        assert not any(r[1] == "cpu" and r[2] != 0 for r in rows if r[0] == trial)  # only the probe's CPU
    assert any(r[3] == "effective_mhz" for r in rows if r[0] == 0)  # the first trial of a variant
    args = ["run", "l2sum", "--trials", "2", "--campaign", str(off), "--no-progress", "--no-evidence", *FAST]
    assert main(args) == 0
    assert os_rows(off) == []
    capsys.readouterr()
