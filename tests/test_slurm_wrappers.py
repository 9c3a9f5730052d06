"""scripts/slurm's two wrappers (tailscope-jobs, tailscope-between-jobs) as slurmd runs them: no PATH, no
HOME, from /. Both read their .conf with the one reader they share (tailscope-slurm.sh, beside them); the
between-jobs wrapper's outcomes: each line names the job and the check's cost, a degraded node fails only
with FAIL=yes, a check past TIMEOUT is stopped and never fails the node. tailscope itself is a stand-in here
(a script that records its arguments and answers as told): the real check under a real slurmd is
tests/cluster/test_between_jobs_prolog.py."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SLURM = Path(__file__).resolve().parents[1] / "scripts" / "slurm"
WRAPPERS = ("tailscope-jobs", "tailscope-between-jobs")
SLURMD_ENV = {"SLURMD_NODENAME": "n9", "SLURM_JOB_ID": "77", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}


def install(etc: Path, name: str, conf: str, *, shared: bool = True) -> Path:
    """The wrapper as a site installs it: a copy in `etc` with its .conf (and the shared part) beside it,
    run through a link in etc/prolog.d/."""
    (etc / "prolog.d").mkdir(parents=True, exist_ok=True)
    shutil.copy(SLURM / name, etc / name)
    if shared:
        shutil.copy(SLURM / "tailscope-slurm.sh", etc)
    (etc / f"{name}.conf").write_text(conf)
    link = etc / "prolog.d" / name
    link.symlink_to(etc / name)
    return link


def stand_in(path: Path, *, code: int, stdout: str = "", sleep: float = 0) -> Path:
    """A `tailscope` that writes its arguments, one a line, to PATH.args, prints `stdout` and exits `code`."""
    lines = ["#!/bin/sh", f'printf "%s\\n" "$@" > {shlex.quote(str(path))}.args']
    if sleep:
        lines.append(f"exec sleep {sleep}")
    lines += [f"printf %s {shlex.quote(stdout)}", f"exit {code}"]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return path


def slurmd_runs(script: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script)], env={**SLURMD_ENV, **env}, cwd="/", capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("name", WRAPPERS)
def test_both_read_their_conf_the_same_way_and_never_run_it(tmp_path: Path, name: str) -> None:
    mark = tmp_path / "ran"
    ts = stand_in(tmp_path / "ts", code=0)
    conf = (
        "# a comment\n\n"
        f"HISTORY=$(touch {mark}) h  'q'\n"  # a value is taken as written: nothing in it runs
        f"TAILSCOPE={ts}\n"
        "ARGS=--one  two\n"
        "COLOUR=red\n"  # unknown: said, skipped
        "PYTHONPATH=/opt/src"  # no newline at the end
    )
    if name == "tailscope-between-jobs":
        conf = f"CAMPAIGNS={tmp_path / 'c'}\n{conf}"
    proc = slurmd_runs(install(tmp_path / "etc", name, conf))
    assert proc.returncode == 0, proc.stderr
    assert not mark.exists()
    assert f"{name}" in proc.stderr and "unknown key 'COLOUR' (expected HISTORY, " in proc.stderr
    args = Path(f"{ts}.args").read_text().splitlines()
    history = f"$(touch {mark}) h  'q'"
    if name == "tailscope-jobs":  # the prolog: ARGS split at spaces
        assert args == ["jobs", "prolog", "--one", "two"]
        epilog = slurmd_runs(tmp_path / "etc" / "prolog.d" / name, SLURM_SCRIPT_CONTEXT="epilog_slurmd")
        assert epilog.returncode == 0
        assert Path(f"{ts}.args").read_text().splitlines() == ["jobs", "epilog", history, "--one", "two"]
    else:
        assert args[:5] == ["check", "--between-jobs", "--budget", "20s", "--history"]
        assert args[5] == history and args[-2:] == ["--one", "two"]
        assert args[args.index("--campaign") + 1].startswith(f"{tmp_path / 'c'}/n9-77-prolog_slurmd-")


@pytest.mark.parametrize("name", WRAPPERS)
def test_without_the_shared_part_beside_it_a_wrapper_says_so_and_exits_0(tmp_path: Path, name: str) -> None:
    proc = slurmd_runs(install(tmp_path / "etc", name, "HISTORY=/h\n", shared=False))
    assert proc.returncode == 0
    assert "tailscope-slurm.sh is missing" in proc.stderr and proc.stderr.startswith(name)


@pytest.mark.parametrize(
    ("code", "stdout", "conf", "exit_code", "said"),
    [
        (0, "", "", 0, "healthy (prolog_slurmd of job 77, "),
        (3, "", "", 0, "inconclusive (prolog_slurmd of job 77, "),
        (1, "ERROR:  nhc:  Health check failed:  check_tailscope:  n9: l2sum 12% below its history\n",
         "DRAIN=no\n", 0, "degraded (prolog_slurmd of job 77, "),
        (1, "ERROR:  nhc:  Health check failed:  check_tailscope:  n9: l2sum 12% below its history\n",
         "DRAIN=no\nFAIL=yes\n", 1, "n9: l2sum 12% below its history; campaign kept: "),
        (2, "", "", 0, "failed (prolog_slurmd of job 77, "),
    ],
)  # fmt: skip
def test_between_jobs_outcomes(tmp_path: Path, code: int, stdout: str, conf: str, exit_code: int, said: str):
    log = tmp_path / "between.log"
    ts = stand_in(tmp_path / "ts", code=code, stdout=stdout)
    base = f"HISTORY=/h\nTAILSCOPE={ts}\nCAMPAIGNS={tmp_path / 'c'}\nLOG={log}\n"
    proc = slurmd_runs(install(tmp_path / "etc", "tailscope-between-jobs", base + conf))
    assert proc.returncode == exit_code, proc.stderr
    line = log.read_text().strip()
    assert said in line and "tailscope-between-jobs: n9: " in line, line
    assert len(log.read_text().splitlines()) == 1  # one line per run


def test_between_jobs_stops_a_check_past_its_timeout_and_never_fails_the_node(tmp_path: Path) -> None:
    log = tmp_path / "between.log"
    ts = stand_in(tmp_path / "ts", code=0, sleep=60)
    conf = f"HISTORY=/h\nTAILSCOPE={ts}\nCAMPAIGNS={tmp_path / 'c'}\nLOG={log}\nTIMEOUT=1\n"
    began = time.monotonic()
    proc = slurmd_runs(install(tmp_path / "etc", "tailscope-between-jobs", conf))
    took = time.monotonic() - began
    assert proc.returncode == 0
    assert (
        "stopped (prolog_slurmd of job 77, " in log.read_text()
        and "longer than TIMEOUT=1 s" in log.read_text()
    )
    assert took < 1 + 5 + 10  # TIMEOUT, the kill grace, and a busy machine's slack
