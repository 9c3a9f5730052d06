"""`validate --until-settled` (issue 33): a clean baseline, then rounds stopped when settled, clean or under
one injection, scored by what each round's verdict was. Which verdicts this busy or quiet machine gives is
not asserted; how they are counted is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tailscope.campaign.stopping import read_record


@pytest.mark.slow
@pytest.mark.root
def test_validate_until_settled_runs_rounds_and_scores_them(tmp_path: Path) -> None:
    campaign = tmp_path / "val"
    options = ["--probe", "l2sum", "--rounds", "2", "--cap", "6", "--injectors", "cpuoccupy"]
    options += [
        "--inject-fraction",
        "0.5",
        "--seed",
        "3",
        "--campaign",
        str(campaign),
        "--json",
        "--no-progress",
    ]
    argv = [sys.executable, "-m", "tailscope", "validate", "--until-settled", *options]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert json.loads((campaign / "validate-settled.json").read_text()) == json.loads(json.dumps(result))
    rounds = result["rounds"]
    assert [r["round"] for r in rounds] == [0, 1] and sorted(str(r["kind"]) for r in rounds) == [
        "None",
        "cpuoccupy",
    ]
    assert all(
        1 <= r["trials"] <= 6 and r["verdict"] in ("healthy", "degraded", "inconclusive") for r in rounds
    )
    for r in rounds:  # each round its own campaign, stopped against the baseline's level
        record = read_record(campaign / f"round-{r['round']:03d}")
        assert record is not None and [b.value for b in record.baselines.values()] == [
            result["baseline"]["value"]
        ]
    clean = result["scores"]["clean"]
    clean_round = next(r for r in rounds if r["kind"] is None)
    assert clean["rounds"] == 1 and clean["degraded"] == int(clean_round["verdict"] == "degraded")
    (cell,) = result["scores"]["injected"].values()
    assert cell["rounds"] == 1 and cell["degraded"] + cell["inconclusive"] + cell["healthy"] == 1
