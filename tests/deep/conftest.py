"""Fixtures of the check --deep tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.analysis.model import CampaignAnalysis, Settings
from tailscope.probes.catalogue import ProbeVariant
from tailscope.verbs.workflow import RunRequest, analyze_campaign, run_campaign


@pytest.fixture
def l2sum_analyzed(tmp_path: Path) -> tuple[Path, CampaignAnalysis]:
    """(campaign, its analysis): two short l2sum trials run for real, where check --deep starts from."""
    campaign = tmp_path / "c"
    run_campaign(
        RunRequest(
            variants=((ProbeVariant("l2sum", {"sums": 20}), 2),), campaign_dir=campaign, show_progress=False
        )
    )
    return campaign, analyze_campaign(campaign, Settings())
