"""The "next:" command of a cause runs a tailscope probe, never an imported one: `tailscope run imported:hpl`
fails (issue 22), so a cause seen on imported runs gets no such hint; one seen on both names the probe."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tailscope.cli import main
from tailscope.report.answer import _runnable_probe, next_command


def _iterations_csv(path: Path, node: str = "n1") -> Path:
    """40 runs of 5 iterations, 3 of them 20% slower in every iteration (a cause is named for them)."""
    rng = random.Random(1)
    rows = ["node,run,iteration,value"]
    for run in range(40):
        factor = 0.8 if run in (5, 17, 29) else 1.0
        rows += [f"{node},{run},{i},{100 * factor * (1 + rng.gauss(0, 0.003)):.4f}" for i in range(5)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_analyze_after_an_import_suggests_no_run_of_the_imported_probe(tmp_path, capsys):
    campaign = tmp_path / "c"
    csv = _iterations_csv(tmp_path / "it.csv")
    assert main(["import", "iterations", str(csv), "--campaign", str(campaign), "--name", "hpl",
                 "--higher-is-better"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["analyze", str(campaign)]) == 1
    out = capsys.readouterr().out
    assert "unknown" in out and "imported:hpl" in out  # the cause is shown, for the imported probe
    assert "tailscope run imported:" not in out and "next: tailscope run" not in out, out


def test_the_next_command_names_a_runnable_probe_or_none() -> None:
    assert next_command("unknown", None, "DIR") == ""
    assert next_command("unknown", "l2sum", "DIR").startswith("tailscope run l2sum --trials 100 --monitor")
    assert next_command("hardware-config", None, "DIR").startswith("tailscope facts")  # runs no probe


def test_the_probe_is_the_cause_s_own_runnable_one() -> None:
    campaign: Any = SimpleNamespace(variants=[SimpleNamespace(probe=p) for p in ("imported:hpl", "stream")])
    assert _runnable_probe({"imported:hpl": 5, "l2sum page=2m": 2}, campaign) == "l2sum"
    assert _runnable_probe({"imported:hpl": 5}, campaign) is None
    fwq: Any = SimpleNamespace(variants=[SimpleNamespace(probe="fwq")])
    assert _runnable_probe({}, fwq) == "fwq"
