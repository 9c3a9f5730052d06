"""scripts/nhc/tailscope.nhc: a slow node dies with tailscope's reason; a missing campaign or a slow answer
only logs. First sourced in bash with NHC's `die` and `log`, then under real upstream NHC 1.4.3 (Debian has no
package; its source tree is found through $TAILSCOPE_NHC_DIR or ../shared/tools/nhc-1.4.3 beside the
repository), run in its own UTS and mount namespace with the node's host name set there, MARK_OFFLINE=0, no
node-marking helpers and scontrol hidden: it can mark nothing."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from .fleet import spec_fleet

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
    factor = np.ones(5)
    factor[2] = 0.8
    return spec_fleet(spec_path, factor, 4, 0.005, np.random.default_rng(9)).root


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


# -- under real NHC 1.4.3 ---------------------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]
NHC_DIR = Path(os.environ.get("TAILSCOPE_NHC_DIR") or REPO.parent / "shared" / "tools" / "nhc-1.4.3")


def run_nhc(
    tmp: Path, conf: list[str], *, hostname: str, nhc_args: tuple[str, ...] = (), tailscope: str | None = None
) -> tuple[int, str, float]:
    """Real NHC with `conf` as nhc.conf (its own scripts and tailscope.nhc in its scripts directory), on a
    node named `hostname`; returns its exit status, its output and how long it took."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare (a UTS and mount namespace for NHC)")
    if not (NHC_DIR / "nhc").is_file():
        pytest.skip(f"upstream NHC 1.4.3 not found at {NHC_DIR} (set TAILSCOPE_NHC_DIR)")
    confdir = tmp / "nhc"
    (confdir / "scripts").mkdir(parents=True, exist_ok=True)
    for script in [*sorted((NHC_DIR / "scripts").glob("*.nhc")), CHECK]:
        target = confdir / "scripts" / script.name
        if not target.exists():
            target.symlink_to(script)
    (confdir / "nhc.conf").write_text("\n".join(conf) + "\n")
    command = tailscope or f"{shlex.quote(sys.executable)} -m tailscope"
    hide = "".join(
        f"mount --bind /bin/false {shlex.quote(path)}; "
        for path in filter(None, (shutil.which(t) for t in ("scontrol", "pbsnodes", "qmgr")))
    )
    nhc = [
        str(NHC_DIR / "nhc"), "-D", str(confdir), "-c", str(confdir / "nhc.conf"), *nhc_args,
        "LOGFILE=-", "MARK_OFFLINE=0", "ONLINE_NODE=:", "OFFLINE_NODE=:", "DETACHED_MODE=0",
        f"RESULTFILE={tmp / 'nhc.status'}",
    ]  # fmt: skip
    script = f"hostname {shlex.quote(hostname)}; {hide}exec {' '.join(map(shlex.quote, nhc))}"
    env = {k: v for k, v in os.environ.items() if k not in ("SLURMD_NODENAME", "TIMEOUT", "HOSTNAME")}
    env["TAILSCOPE"] = command
    t0 = time.monotonic()
    proc = subprocess.run(
        ["unshare", "--uts", "--mount", "--fork", "bash", "-c", script],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0


@pytest.mark.root
def test_real_nhc_passes_a_healthy_node_and_fails_a_degraded_one_found_by_its_short_name(
    fleet: Path, tmp_path: Path
) -> None:
    conf = [f"* || check_tailscope {fleet}"]
    rc, out, _ = run_nhc(tmp_path, conf, hostname="c0000.cluster.local")
    assert rc == 0, out
    assert "Health check failed" not in out
    rc, out, _ = run_nhc(tmp_path, conf, hostname="c0002.cluster.local", nhc_args=("-t", "40"))
    assert rc != 0, out
    reason = "Health check failed:  check_tailscope:  c0002: l2sum "
    failed = [line for line in out.splitlines() if reason in line]
    assert failed and "slower" in failed[0], out


@pytest.mark.root
def test_real_nhc_hostname_override_names_the_node(fleet: Path, tmp_path: Path) -> None:
    """NHC's own HOSTNAME= setting (the node's name in Slurm differs from its host name) is the one judged."""
    rc, out, _ = run_nhc(
        tmp_path, [f"* || check_tailscope {fleet}"], hostname="login-7", nhc_args=("HOSTNAME=c0002",)
    )
    assert rc != 0 and "check_tailscope:  c0002: l2sum " in out, out


@pytest.mark.root
def test_real_nhc_a_missing_campaign_never_fails_the_node(tmp_path: Path) -> None:
    rc, out, _ = run_nhc(tmp_path, [f"* || check_tailscope {tmp_path / 'gone'}"], hostname="c0001")
    assert rc == 0, out
    assert "tailscope cannot read its input; node not failed" in out


def _slow_tailscope(tmp: Path) -> tuple[str, Path]:
    """A `tailscope` that answers after 300 s, recording its pid (a hung shared file system, a busy node)."""
    pidfile = tmp / "slow.pid"
    script = tmp / "slow-tailscope"
    script.write_text(f"#!/bin/sh\necho $$ > {shlex.quote(str(pidfile))}\nexec sleep 300\n")
    script.chmod(0o755)
    return str(script), pidfile


def _gone(pidfile: Path, deadline_s: float = 15.0) -> bool:
    pid = int(pidfile.read_text())
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.root
@pytest.mark.parametrize(
    "nhc_args",
    [("-t", "8"), ("-t", "8", "TS=1"), pytest.param((), marks=pytest.mark.slow)],
    ids=["t8", "t8-timestamps", "default-30s"],
)
def test_real_nhc_a_slow_answer_never_fails_the_node(
    fleet: Path, tmp_path: Path, nhc_args: tuple[str, ...]
) -> None:
    slow, pidfile = _slow_tailscope(tmp_path)
    rc, out, took = run_nhc(tmp_path, [f"* || check_tailscope {fleet}"], hostname="c0002", nhc_args=nhc_args,
                            tailscope=slow)  # fmt: skip
    assert rc == 0, out  # not "Script timed out": the check's own deadline comes first
    assert "tailscope verdict took longer than" in out and "node not failed" in out
    nhc_timeout = int(nhc_args[1]) if nhc_args else 30  # TS=1: NHC counts SECONDS from the epoch
    assert took < nhc_timeout, (took, out)
    assert _gone(pidfile)


@pytest.mark.root
def test_real_nhc_giving_up_leaves_no_tailscope_running(fleet: Path, tmp_path: Path) -> None:
    """NHC's watchdog fires while the check runs (here: TIMEOUT raised in nhc.conf after the watchdog started
    with 4 s): its signals to NHC's process group end tailscope and the timeout wrapper too."""
    slow, pidfile = _slow_tailscope(tmp_path)
    conf = ["* || export TIMEOUT=120", f"* || check_tailscope {fleet}"]
    rc, out, _ = run_nhc(tmp_path, conf, hostname="c0002", nhc_args=("-t", "4"), tailscope=slow)
    assert rc != 0 and "Script timed out" in out, out  # NHC's own verdict on its own timeout
    assert _gone(pidfile), f"the slow tailscope (pid {pidfile.read_text().strip()}) outlived NHC"
    left = subprocess.run(["pgrep", "-f", f"timeout --foreground -k 2 .* {slow}"], capture_output=True)
    assert left.returncode == 1, left.stdout


def test_node_names_are_looked_up_in_the_promised_order(monkeypatch: pytest.MonkeyPatch) -> None:
    from tailscope.verbs.verdict import this_node_names

    monkeypatch.setattr("tailscope.verbs.verdict.this_node", lambda: "c0005.cluster.local")
    monkeypatch.setenv("SLURMD_NODENAME", "n17")
    monkeypatch.setenv("HOSTNAME", "c0005-ib.cluster.local")
    assert this_node_names() == ["n17", "c0005-ib.cluster.local", "c0005.cluster.local", "c0005-ib", "c0005"]
    monkeypatch.delenv("SLURMD_NODENAME")
    monkeypatch.delenv("HOSTNAME")
    assert this_node_names() == ["c0005.cluster.local", "c0005"]
