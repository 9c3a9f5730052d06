"""Live: real applications nobody here wrote, from Debian (lammps + lammps-examples, gromacs, hpcc), as the
trials of `tailscope run -- CMD`. Their figures must equal what the program printed (read back from the raw
output kept with each trial), and a stress-ng co-runner on the application's CPU during a known window must be
named for the trials inside it and for no trial outside it.

About 3 minutes on a 2-vCPU guest: LAMMPS 20 trials of ~2 s, GROMACS 10 of ~2 s, hpcc 3 of ~12 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from app_tools import run_words, tailscope_child, tailscope_env, wait_for

from netns import LOOPBACK_ONLY
from store_tools import stored
from tailscope.cli import main

pytestmark = pytest.mark.slow
MELT = Path("/usr/share/lammps/examples/melt/in.melt")
CACHE = Path("/var/cache/tailscope-tests")
PERF_LINE = re.compile(r"Performance: .*, ([0-9.]+) timesteps/s")


def need(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (Debian: see packaging/debian-packages-test.txt)")


def trial_files(campaign: Path) -> dict[int, Path]:
    """trial -> its kept stdout tail (trial-NNNNNN.stdout beside the working directories)."""
    out = {}
    for path in (campaign / "app").rglob("trial-*.stdout"):
        out[int(path.name.split("-")[1].split(".")[0])] = path
    return out


def melt_input(tmp_path: Path, steps: int) -> Path:
    """The LJ melt example with more steps (a trial of about 2 s here)."""
    text = re.sub(r"^run\s+\d+", f"run\t\t{steps}", MELT.read_text(), flags=re.M)
    path = tmp_path / "in.melt"
    path.write_text(text)
    return path


def test_lammps_with_a_stress_ng_window(tmp_path):
    """20 LAMMPS trials pinned to one CPU; stress-ng on that CPU from trial 6 until trial 12 starts."""
    need("lmp", "stress-ng", "taskset")
    if not MELT.exists():
        pytest.skip("lammps-examples not installed")
    cpu = str(max(os.sched_getaffinity(0)))
    deck = melt_input(tmp_path, 700)
    campaign = tmp_path / "c"
    argv = run_words(
        campaign,
        20,
        "--metric",
        "timesteps_per_s:timesteps/s:higher=" + PERF_LINE.pattern,
        "--metric",
        r"loop_time:s=Loop time of ([0-9.]+) on",
        "--sanity",
        "Total wall time",
        "--",
        "taskset",
        "-c",
        cpu,
        "lmp",
        "-in",
        str(deck),
    )
    proc = tailscope_child(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stress = None
    try:
        base = campaign / "app"
        assert wait_for(lambda: any(base.rglob("trial-000006")), 300)
        window_start = time.time()
        stress = subprocess.Popen(
            ["stress-ng", "--cpu", "1", "--taskset", cpu, "--timeout", "300"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_for(lambda: any(base.rglob("trial-000012")), 300)
        stress.send_signal(signal.SIGTERM)
        stress.wait(timeout=30)
        window_end = time.time()
        _, err = proc.communicate(timeout=600)
    finally:
        for p in (stress, proc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert proc.returncode == 0, err
    rows = stored(campaign, "SELECT trial, run_id, value, status, cpus, epoch(started_at), wall_s FROM runs")
    assert len(rows) == 20 and all(r[3] == "ok" for r in rows)
    # the figures are what LAMMPS printed (its kept output, read here with our own pattern)
    tails = trial_files(campaign)
    for trial, _, value, *_ in rows:
        printed = PERF_LINE.findall(tails[trial].read_text())
        assert printed and float(printed[-1]) == value
    assert {r[4] for r in rows} == {cpu}
    analysis = _analyze_json(campaign)
    runs = {r["run_id"]: r for r in analysis["runs"]}
    names = _corunner_names(campaign)
    inside = [r for r in rows if r[5] >= window_start + 0.3 and r[5] + r[6] <= window_end - 0.3]
    outside = [r for r in rows if r[5] + r[6] < window_start or r[5] > window_end + 1.0]
    assert len(inside) >= 3 and len(outside) >= 8, (len(inside), len(outside))
    for trial, run_id, *_ in inside:
        verdict = runs[run_id]
        assert verdict["flagged"], f"trial {trial} in the stress-ng window was not flagged"
        first = verdict["causes"][0]
        assert first["cause"] == "cpu-contention", (trial, verdict["causes"])
        assert "stress-ng" in first["sentence"], first["sentence"]
        assert any(n.startswith("stress-ng") for n in names.get(run_id, ()))
    for trial, run_id, *_ in outside:
        assert not any(n.startswith("stress-ng") for n in names.get(run_id, ())), f"trial {trial}"
    # the one screen (`analyze`, as `check --app` prints it) names the cause and the co-runner
    screen = subprocess.run(
        [sys.executable, "-m", "tailscope", "analyze", str(campaign)],
        capture_output=True,
        text=True,
        env=tailscope_env(),
        timeout=300,
    ).stdout
    assert "cpu-contention" in screen and "stress-ng" in screen, screen


def _analyze_json(campaign: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tailscope", "analyze", str(campaign), "--json"],
        capture_output=True,
        text=True,
        env=tailscope_env(),
        timeout=300,
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    return json.loads(proc.stdout)


def _corunner_names(campaign: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for run_id, comm in stored(campaign, "SELECT run_id, comm FROM corunners"):
        out.setdefault(run_id, set()).add(comm)
    return out


# GROMACS: a 510-molecule SPC/E water box from packaged files only (gmx solvate, grompp), 1500 steps.
TOPOL = """#include "oplsaa.ff/forcefield.itp"
#include "oplsaa.ff/spce.itp"

[ system ]
water box

[ molecules ]
SOL 510
"""
MDP = """integrator = md
nsteps = 1500
dt = 0.002
cutoff-scheme = Verlet
coulombtype = PME
rcoulomb = 1.0
rvdw = 1.0
tcoupl = V-rescale
tc-grps = System
tau_t = 0.1
ref_t = 300
constraints = h-bonds
"""


def water_tpr() -> Path:
    """md.tpr prepared by gmx itself, cached by its inputs under /var/cache/tailscope-tests."""
    key = hashlib.sha1((TOPOL + MDP + (shutil.which("gmx") or "")).encode()).hexdigest()[:12]
    out = CACHE / f"gromacs-water-{key}"
    tpr = out / "md.tpr"
    if tpr.exists():
        return tpr
    work = Path(str(out) + f".tmp{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    (work / "topol.top").write_text(TOPOL)
    (work / "md.mdp").write_text(MDP)
    quiet = {"cwd": work, "check": True, "capture_output": True}
    subprocess.run(
        ["gmx", "solvate", "-cs", "spc216.gro", "-box", "2.5", "2.5", "2.5", "-o", "water.gro"], **quiet
    )
    subprocess.run(
        ["gmx", "grompp", "-f", "md.mdp", "-c", "water.gro", "-p", "topol.top", "-o", "md.tpr"], **quiet
    )
    try:
        work.rename(out)
    except OSError:  # another test process made it first
        shutil.rmtree(work, ignore_errors=True)
    return tpr


def test_gromacs_figures_from_md_log(tmp_path, capsys):
    need("gmx")
    tpr = water_tpr()
    campaign = tmp_path / "c"
    assert (
        main(
            run_words(
                campaign,
                10,
                "--metric-file",
                "md.log",
                "--metric",
                r"ns_per_day:ns/day:higher=^Performance:\s+([0-9.]+)",
                "--",
                "gmx",
                "mdrun",
                "-s",
                str(tpr),
                "-nt",
                "1",
                "-nobackup",
            )
        )
        == 0
    )
    rows = stored(campaign, "SELECT trial, value, unit, higher_is_better, status FROM runs ORDER BY trial")
    assert len(rows) == 10 and all(r[4] == "ok" and r[2] == "ns/day" and r[3] for r in rows)
    # GROMACS prints the same line on stderr: the stored figure is what it printed there
    for trial, value, *_ in rows:
        stderr = next((campaign / "app").rglob(f"trial-{trial:06d}.stderr")).read_text()
        printed = re.findall(r"^Performance:\s+([0-9.]+)", stderr, flags=re.M)
        assert printed and float(printed[-1]) == value
    workdirs = sorted(p for p in (campaign / "app").rglob("trial-*") if p.is_dir())
    assert len(workdirs) == 8 and all((w / "md.log").exists() for w in workdirs)  # the last 8 kept


HPCCINF_N = 2000


def test_hpcc_three_trials_through_its_reader(tmp_path, monkeypatch):
    """hpcc binds every network interface: it runs in `unshare --net` with only loopback up, as root, with
    Open MPI's allow-run-as-root variables; its figure comes from hpccoutf.txt through the hpcc reader."""
    need("hpcc", "mpirun", "unshare", "ip")
    if os.geteuid() != 0:
        pytest.skip("unshare --net needs root")
    from tailscope.importers.hpcc_run import write_hpccinf

    inf = write_hpccinf(tmp_path, n=HPCCINF_N, nb=64, p=1, q=1)
    for name, value in (
        ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
        ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        ("OPENBLAS_NUM_THREADS", "1"),
    ):
        monkeypatch.setenv(name, value)
    campaign = tmp_path / "c"
    assert (
        main(
            run_words(
                campaign,
                3,
                "--format",
                "hpcc",
                "--metric-file",
                "hpccoutf.txt",
                "--prepare",
                f"cp {inf} hpccinf.txt",
                "--",
                *LOOPBACK_ONLY,
                "mpirun",
                "-np",
                "1",
                "--mca",
                "btl",
                "self,vader",
                "hpcc",
            )
        )
        == 0
    )
    rows = stored(campaign, "SELECT trial, value, metric, unit, summary, status FROM runs ORDER BY trial")
    assert [r[5] for r in rows] == ["ok"] * 3
    assert {r[0] for r in rows} == {0, 1, 2} and all(r[2:4] == ("gflops", "GFLOPS") for r in rows)
    for trial, value, *_ in rows:
        work = next((campaign / "app").rglob(f"trial-{trial:06d}"))
        text = (work / "hpccoutf.txt").read_text()
        printed = re.findall(rf"^WR\S+\s+{HPCCINF_N}\s+64\s+1\s+1\s+\S+\s+(\S+)", text, flags=re.M)
        assert printed and float(printed[-1]) == value


def test_readme_lammps_example_runs_as_written(tmp_path):
    """README "Your own application": its commands, as written (3 trials instead of 20, and
    `python -m tailscope` for this tree's `tailscope`), and its definition file through check's loader."""
    need("lmp")
    if not MELT.exists():
        pytest.skip("lammps-examples not installed")
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text.split("## Your own application", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    script = next(body for lang, body in blocks if lang == "sh" and "lmp" in body)
    script = script.replace("--trials 20", "--trials 3").replace(
        "tailscope ", f"{sys.executable} -m tailscope "
    )
    proc = subprocess.run(
        ["sh", "-ec", script], cwd=tmp_path, capture_output=True, text=True, env=tailscope_env(), timeout=600
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    assert "trials stored: 3 (0 not ok)" in proc.stdout and "app:lmp" in proc.stdout
    values = [v for (v,) in stored(tmp_path / "runs" / "melt", "SELECT value FROM runs")]
    assert len(values) == 3 and all(v > 0 for v in values)
    from tailscope.app.definition import load_definition

    toml = next(body for lang, body in blocks if lang == "toml")
    variant, trials = load_definition(_write(tmp_path / "melt.toml", toml))
    assert trials == 20 and variant.probe == "app:melt" and variant.argv[0] == "lmp"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
