"""scripts/nhc/tailscope.nhc, sourced in bash with NHC's `die` and `log` (NHC itself is not packaged by Debian
and is not installed here): a slow node dies with tailscope's reason; a missing campaign only logs."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tailscope.campaign import slurm
from tailscope.campaign.spec import load_spec

from .fleet import fleet_frame, write_frame

CHECK = Path(__file__).resolve().parents[2] / "scripts" / "nhc" / "tailscope.nhc"
SPEC = """\
[campaign]
directory = "camp"

[slurm]
partition = "batch"
nodes = "c[0000-0004]"

[[probes]]
probe = "l2sum"
trials = 4
options = { sums = 50, cpus = "0-1" }

[cluster]
alpha_drain = 0.01
"""

# As NHC defines them (nhc's `die RC MSG...`: record the failure and its message, mark the check as died;
# `log MSG...`: append to the log). They print what they record so the test can read it.
NHC_FUNCTIONS = """
die() { local rc="$1"; shift; echo "DIE[$rc]: $*"; CHECK_DIED=1; return "$rc"; }
log() { echo "LOG: $*"; }
"""


def run_check(*args: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    tailscope = f"{shlex.quote(sys.executable)} -m tailscope"
    script = (
        f"{NHC_FUNCTIONS}\nTAILSCOPE={shlex.quote(tailscope)}\nsource {shlex.quote(str(CHECK))}\n"
        f"check_tailscope {' '.join(shlex.quote(a) for a in args)}\nrc=$?\n"
        'echo "RC=$rc DIED=${CHECK_DIED:-0}"\n'
    )
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )
    assert proc.stderr == "", proc.stderr
    lines = proc.stdout.strip().splitlines()
    return proc.returncode, lines


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five nodes, c0002 20% slower."""
    tmp = tmp_path_factory.mktemp("fleet")
    spec_path = tmp / "spec.toml"
    spec_path.write_text(SPEC)
    campaign = slurm.prepare(load_spec(spec_path))
    factor = np.ones(5)
    factor[2] = 0.8
    frame = fleet_frame(factor, 4, 0.005, np.random.default_rng(9))
    frame["variant"] = campaign.manifest.plans[0].variant
    write_frame(campaign, frame)
    return campaign.root


def test_slow_node_dies_with_tailscopes_reason(fleet: Path) -> None:
    _, lines = run_check(str(fleet), "--node", "c0002")
    assert lines[-1] == "RC=1 DIED=1"
    died = [line for line in lines if line.startswith("DIE[1]: ")]
    assert len(died) == 1, lines
    assert died[0].startswith("DIE[1]: check_tailscope:  c0002: l2sum ") and "slower" in died[0]
    assert "expected 0" not in died[0]  # not check_cmd_status's generic reason


def test_healthy_node_passes_silently(fleet: Path) -> None:
    _, lines = run_check(str(fleet), "--node", "c0000")
    assert lines == ["RC=0 DIED=0"]


def test_missing_campaign_logs_and_does_not_fail_the_node(tmp_path: Path) -> None:
    _, lines = run_check(str(tmp_path / "no-such-campaign"), "--node", "c0000")
    assert lines[-1] == "RC=0 DIED=0"
    logged = [line for line in lines if line.startswith("LOG: ")]
    assert len(logged) == 1 and "tailscope cannot read its input; node not failed" in logged[0]
    assert "no-such-campaign" in logged[0]


def test_tailscope_not_runnable_logs_and_does_not_fail(tmp_path: Path) -> None:
    script = (
        f"{NHC_FUNCTIONS}\nTAILSCOPE=/nonexistent/tailscope\nsource {shlex.quote(str(CHECK))}\n"
        f'check_tailscope {shlex.quote(str(tmp_path))}; echo "RC=$? DIED=${{CHECK_DIED:-0}}"\n'
    )
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "RC=0 DIED=0" and "cannot run '/nonexistent/tailscope' (exit 127)" in lines[0]
