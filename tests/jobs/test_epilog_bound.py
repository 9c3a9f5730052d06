"""The prolog and epilog always end within their bound and exit 0: a hung read (a FIFO where /proc/vmstat
should be: its open() blocks until a writer comes, as a hung driver's read would), a hung store, a crash;
with Slurm's bare environment (no PATH, no HOME) through scripts/slurm/tailscope-jobs; and nothing heavy is
imported on their path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from jobs_node_tree import build, tailscope

from installed import PACKAGE_ROOT
from tailscope.jobs import epilog

WRAPPER = Path(__file__).resolve().parents[2] / "scripts" / "slurm" / "tailscope-jobs"
SLACK_S = 5.0  # a busy 2-CPU machine: Python's start-up and the fork can take seconds; a hang takes forever


def _env(**more: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "77", "SLURMD_NODENAME": "n2", **more}


def _hung_vmstat(root: Path) -> None:
    (root / "proc" / "vmstat").unlink()
    os.mkfifo(root / "proc" / "vmstat")


def _epilog(root: Path, tmp_path: Path, *timeout: str) -> tuple[float, subprocess.CompletedProcess]:
    began = time.monotonic()
    args = ["--print", "--root", str(root), *timeout, "--state-dir", str(tmp_path / "s")]
    proc = tailscope("jobs", "epilog", "/unused", *args, env=_env())
    return time.monotonic() - began, proc


def test_a_hung_read_still_gives_a_record_within_the_bound(tmp_path: Path) -> None:
    root = build(tmp_path / "node")
    _hung_vmstat(root)
    # a bound no loaded machine reaches before the readings' share of it: the record, without the hung read
    took, proc = _epilog(root, tmp_path, "--timeout", "4")
    assert proc.returncode == 0 and took < 4 + SLACK_S, (took, proc.stderr)
    record = json.loads(proc.stdout)
    (error,) = record["errors"]
    assert error.startswith("vmstat: no answer in time (/proc/vmstat, still reading after ")
    assert error.endswith("the sources after it were not read")
    ev = record["evidence"]
    assert ev["mce.count.total"] == 1  # /proc/interrupts came before it
    assert not any(n.startswith(("vmstat.", "cpu.", "cpufreq.")) for n in ev)  # at and after it: not read
    assert record["facts_digest"] == ""  # the facts come last: unknown
    assert record["epilog_wall_s"] < 4
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(
        "tailscope jobs epilog: job 77 on n2: vmstat"
    )

    # the default bound: the record as above, or on a machine too busy for even that, the bound said
    took, proc = _epilog(root, tmp_path)
    assert proc.returncode == 0 and took < epilog.DEFAULT_TIMEOUT_S + SLACK_S, (took, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr
    said = proc.stderr.removeprefix("tailscope jobs epilog: job 77 on n2: ")
    assert said.startswith(("vmstat: no answer in time", "not finished within 1.8 s")), said
    print(f"\nthe default bound: {took:.2f} s, {said.split('(')[0]}")


def test_a_hung_read_in_the_prolog_keeps_what_came_before(tmp_path: Path) -> None:
    root, state = build(tmp_path / "node"), tmp_path / "state"
    _hung_vmstat(root)
    began = time.monotonic()
    proc = tailscope(
        "jobs", "prolog", "--root", str(root), "--state-dir", str(state), "--timeout", "4", env=_env()
    )
    assert proc.returncode == 0 and time.monotonic() - began < 4 + SLACK_S
    assert "vmstat: no answer in time" in proc.stderr
    reading = json.loads((state / "job-77-n2.json").read_text())["reading"]
    assert reading["counters"]["mce.count"] == 1 and "vmstat.compact_stall" not in reading["counters"]


def test_work_that_never_answers_is_cut_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"

    def hang() -> dict:  # a store write that never returns
        pid_file.write_text(str(os.getpid()))
        time.sleep(3600)
        return {}

    began = time.monotonic()
    answer = epilog.run_bounded(hang, began + 0.5)
    took = time.monotonic() - began
    assert answer == {"timeout": True} and 0.5 <= took < 0.5 + SLACK_S
    pid, end = int(pid_file.read_text()), time.monotonic() + SLACK_S
    while True:  # the worker was killed (reaped by run_bounded, or soon after on a busy machine)
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            break
        if done:
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
            break
        assert time.monotonic() < end, "the worker is still running"
        time.sleep(0.01)


def test_the_worker_answers_crashes_and_holds_no_output_open() -> None:
    def where_output_goes() -> dict:
        return {"fds": [os.readlink(f"/proc/self/fd/{fd}") for fd in (0, 1, 2)]}

    assert epilog.run_bounded(where_output_goes, time.monotonic() + 30) == {"fds": ["/dev/null"] * 3}

    def crash() -> dict:
        raise RuntimeError("disk on fire")

    assert epilog.run_bounded(crash, time.monotonic() + 30) == {"failed": "RuntimeError: disk on fire"}


# --- Slurm's bare environment, through the wrapper ------------------------------------------------------
def _wrapper(tmp_path: Path, conf: str) -> Path:
    here = tmp_path / "etc-slurm"
    here.mkdir()
    shutil.copy(WRAPPER, here / "tailscope-jobs")
    shutil.copy(WRAPPER.parent / "tailscope-slurm.sh", here)  # the wrappers' shared part, beside it
    (here / "tailscope-jobs.conf").write_text(conf)
    return here / "tailscope-jobs"


def _slurmd_runs(wrapper: Path, context: str, **env: str) -> subprocess.CompletedProcess:
    """As slurmd runs a prolog/epilog: its environment only (no PATH, no HOME), from /."""
    full = {"SLURM_SCRIPT_CONTEXT": context, **_env(), **env}
    return subprocess.run([str(wrapper)], env=full, cwd="/", capture_output=True, text=True, timeout=120)


def test_wrapper_runs_prolog_and_epilog_with_no_path(tmp_path: Path) -> None:
    root = build(tmp_path / "node")
    state = tmp_path / "state"
    conf = (
        f"# as a site writes it\nPYTHON={sys.executable}\nPYTHONPATH={PACKAGE_ROOT}\n"
        f"HISTORY={tmp_path / 'history'}\n"
        f"ARGS=--root {root} --state-dir {state} --timeout 60\n"
    )
    wrapper = _wrapper(tmp_path, conf)
    pro = _slurmd_runs(wrapper, "prolog_slurmd")
    assert pro.returncode == 0 and pro.stderr == "", pro.stderr
    assert (state / "job-77-n2.json").is_file()
    # the epilog with --print added: its record on stdout, nothing stored
    (wrapper.parent / "tailscope-jobs.conf").write_text(conf.replace("ARGS=", "ARGS=--print "))
    epi = _slurmd_runs(wrapper, "epilog_slurmd")
    assert epi.returncode == 0 and epi.stderr == "", epi.stderr
    record = json.loads(epi.stdout)
    assert record["job_id"] == "77" and record["errors"] == [] and "mce.count" in record["evidence"]
    assert not (state / "job-77-n2.json").exists()


@pytest.mark.parametrize(
    ("conf", "context", "line"),
    [
        ("", "epilog_slurmd", "no HISTORY= in "),
        ("HISTORY=/h\nTAILSCOPE=/nonexistent/tailscope\n", "epilog_slurmd", "no tailscope found"),
        ("HISTORY=/h\nPYTHON=/bin/false\n", "epilog_slurmd", "tailscope jobs epilog exited with 1"),
        ("PYTHON=/bin/false\nCOLOUR=red\n", "prolog_slurmd", "unknown key 'COLOUR'"),
        ("HISTORY=/h\n", "task_prolog", "run by slurmd as Prolog= or Epilog="),
    ],
)
def test_wrapper_always_exits_0_and_says_why(tmp_path: Path, conf: str, context: str, line: str) -> None:
    proc = _slurmd_runs(_wrapper(tmp_path, conf), context)
    assert proc.returncode == 0
    assert line in proc.stderr and proc.stderr.startswith("tailscope-jobs: ")


def test_a_usage_error_inside_still_exits_0_through_the_wrapper(tmp_path: Path) -> None:
    conf = f"PYTHON={sys.executable}\nPYTHONPATH={PACKAGE_ROOT}\nHISTORY=/h\nARGS=--timeout 0\n"
    proc = _slurmd_runs(_wrapper(tmp_path, conf), "epilog_slurmd")
    assert proc.returncode == 0
    assert "--timeout: 0: expected a finite number >= 0.2" in proc.stderr
    assert "tailscope-jobs: tailscope jobs epilog exited with 2" in proc.stderr


# --- nothing heavy on the path --------------------------------------------------------------------------
PROBE = """
import json, sys
from pathlib import Path
from tailscope.cli import main
root, state = sys.argv[1], sys.argv[2]
args = ["--root", root, "--state-dir", state, "--job-id", "5"]
assert main(["jobs", "prolog", *args]) == 0
assert main(["jobs", "epilog", "/unused", "--print", *args]) == 0
# what the forked worker imports, here in this process too
from tailscope.evidence import nodespan
from tailscope.jobs import epilog
nodespan.read(); epilog.facts_digest()
try:
    import tailscope.jobs.store  # the record's store (helper "jobs"): cheap on this path too
except ModuleNotFoundError:
    pass
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "pandas", "pyarrow", "duckdb", "scipy"})
print("HEAVY " + json.dumps(heavy))
"""


def test_no_heavy_import_on_the_prolog_and_epilog_path(tmp_path: Path) -> None:
    root = build(tmp_path / "node")
    env = {"PYTHONPATH": str(PACKAGE_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(root), str(tmp_path / "s")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("HEAVY "))
    assert json.loads(line.removeprefix("HEAVY ")) == []


def test_a_history_url_that_cannot_be_reached_is_said_without_its_password(tmp_path: Path) -> None:
    """The epilog's line (stderr and syslog, which others on the node may read) names the history: as every
    other message does, without the password a URL carries (found on issue 30's acceptance pass: it printed
    `not stored in postgresql://u:PW@...`)."""
    pytest.importorskip("psycopg")
    root = build(tmp_path / "node")
    for url in ("postgresql://u:s3cret@127.0.0.1:1/site", "postgresql://u@127.0.0.1:1/site?password=s3cret"):
        args = ["--root", str(root), "--state-dir", str(tmp_path / "s"), "--timeout", "20"]
        proc = tailscope("jobs", "epilog", url, *args, env=_env())
        assert proc.returncode == 0, proc.stderr
        assert "s3cret" not in proc.stdout + proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "not stored in postgresql://u@127.0.0.1:1/site" in proc.stderr
