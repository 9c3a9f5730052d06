"""One campaign, one set of limits: a Slurm campaign's spec [thresholds] judge it in analyze, report, compare
and verdict alike, and an option given on the command line overrides the spec's value of that setting only
(verbs/settings.py). Before, verdict applied [thresholds] and analyze and report did not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tailscope.cli import main
from tailscope.verbs.settings import judging_settings

from .fleet import spec_fleet

SPEC = """\
[campaign]
directory = "camp"

[slurm]
nodes = "c[0000-0003]"
time_limit = "00:30:00"

[[probes]]
probe = "l2sum"
trials = 12

[thresholds]
max_cv = 0.001
allowed_slow_rate = 0.02
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four equal nodes with 0.5% run noise: healthy by the default limits, degraded by the spec's max_cv."""
    tmp = tmp_path_factory.mktemp("judging")
    spec_path = tmp / "spec.toml"
    spec_path.write_text(SPEC)
    return spec_fleet(spec_path, np.ones(4), 12, 0.005, np.random.default_rng(3)).root


def _report_state(path: Path) -> str:
    match = re.search(r'<section id="verdict" class="verdict v-(\w+)">', path.read_text())
    assert match, "the report has no verdict box"
    return match.group(1)


def test_analyze_report_and_verdict_judge_with_the_spec_thresholds(campaign: Path, tmp_path, capsys) -> None:
    settings = judging_settings(campaign)
    assert settings.max_cv == 0.001 and settings.allowed_slow_rate == 0.02  # the spec's, not the defaults

    code = main(["analyze", str(campaign), "--json"])
    analysis = json.loads(capsys.readouterr().out)
    assert analysis["settings"]["max_cv"] == 0.001 and analysis["settings"]["allowed_slow_rate"] == 0.02
    states = {n["node"]: n["verdict"] for n in analysis["nodes"]}
    assert set(states.values()) == {"degraded"}, states  # every node's CV is ~0.005 > 0.001
    assert code == 1

    out = tmp_path / "report.html"
    assert main(["report", str(campaign), "-o", str(out)]) == 0
    assert _report_state(out) == "degraded"

    for node in states:
        assert main(["verdict", str(campaign), "--nhc", "--node", node]) == 1
    assert "check_tailscope" in capsys.readouterr().out


def test_an_option_overrides_the_spec_setting_it_names_and_keeps_the_others(campaign: Path, capsys) -> None:
    code = main(["analyze", str(campaign), "--json", "--max-cv", "off"])
    analysis = json.loads(capsys.readouterr().out)
    assert analysis["settings"]["max_cv"] is None  # the option's
    assert analysis["settings"]["allowed_slow_rate"] == 0.02  # still the spec's
    assert code == 0 and {n["verdict"] for n in analysis["nodes"]} == {"healthy"}
    assert main(["verdict", str(campaign), "--nhc", "--node", "c0000", "--max-cv", "off"]) == 0
    assert capsys.readouterr().out == ""


def test_a_bad_option_is_refused_before_the_campaign_is_read(tmp_path, capsys) -> None:
    missing = tmp_path / "no-such-campaign"
    for verb in ("analyze", "verdict", "report"):
        extra = ["-o", str(tmp_path / "r.html")] if verb == "report" else []
        assert main([verb, str(missing), "--max-slow-rate", "1", *extra]) == 2  # the parser takes [0, 1]
        err = capsys.readouterr().err
        assert "max_slow_rate" in err and "no-such-campaign" not in err, err
