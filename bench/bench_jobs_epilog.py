#!/usr/bin/env python3
"""What tailscope's Slurm prolog and epilog cost a node: wall and CPU time, as slurmd runs them.

    PYTHONPATH=src .venv/bin/python bench/bench_jobs_epilog.py [--rounds 20] [--history DIR]

Each round runs, interleaved and as slurmd would (scripts/slurm/tailscope-jobs through a link, an empty
environment but SLURM_JOB_ID, SLURMD_NODENAME and SLURM_SCRIPT_CONTEXT, cwd /): the peer (this Python
starting and doing nothing: `python -c pass`, the floor of any Python epilog), the prolog, then the epilog,
which appends its record to the history (a scratch directory unless --history; where the jobs store is not
installed the record is printed instead, and the store's part is not measured). Round 0 warms the page
cache and is dropped.

The fourth part, `figures`, is the epilog of a job tagged `--comment=tailscope:rate` whose definition is in
the epilog's --apps directory: it also reads the job's figure of merit in its output (a 200 MB file, the
figure at its end; read as the user nobody where the bench runs as root), in a process of its own
(jobs/output.py). How many of its records hold the figure is printed: one without it lost it to the bound.

Wall time is from spawn to exit; CPU time is the child's user + system time including everything it waited
for (os.wait4: the shell, Python, the forked worker, dmidecode for the node facts). Printed per part: median
and max, and the ratio to the peer's median. Targets (issue 32): the epilog under 1 s of CPU and 2 s of wall
time, every round. The load average is printed before and after: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "scripts" / "slurm" / "tailscope-jobs"


def spawn(argv: list[str], env: dict[str, str]) -> tuple[float, float, int, str, list[str]]:
    """(wall s, CPU s, exit status, stdout, stderr lines) of one child and everything it waited for."""
    with tempfile.TemporaryFile() as err:
        return _spawn(argv, env, err)


def _spawn(argv: list[str], env: dict[str, str], err: Any) -> tuple[float, float, int, str, list[str]]:
    r, w = os.pipe()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.chdir("/")
        os.dup2(w, 1)
        os.dup2(err.fileno(), 2)
        os.close(r)
        os.close(w)
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - began
    err.seek(0)
    lines = err.read().decode(errors="replace").splitlines()
    code = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, code, b"".join(chunks).decode(), lines


def _figures_job(tmp_path: Path) -> tuple[Path, Path]:
    """The --apps directory with rate.toml, and a 200 MB job output ending with its figure, in a directory of
    the user nobody where this runs as root (the reader becomes the job's user)."""
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "rate.toml").write_text('name = "rate"\nmetrics = ["rate:it/s:higher=^rate: ([0-9.]+) it/s$"]\n')
    work = tmp_path / "work"
    work.mkdir()
    output = work / "output.txt"
    with open(output, "w") as f:
        block = ("x" * 99 + "\n") * 10_000
        for _ in range(200):
            f.write(block)
        f.write("rate: 1234.5 it/s\n")
    if os.geteuid() == 0:
        tmp_path.chmod(0o755)
        os.chown(work, 65534, 65534)
        os.chown(output, 65534, 65534)
    return apps, output


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--history", type=Path, help="the history to append to (default: a scratch directory)"
    )
    args = parser.parse_args()
    try:
        import tailscope.jobs.store  # noqa: F401
    except ModuleNotFoundError:
        store = False
    else:
        store = True

    with tempfile.TemporaryDirectory(prefix="bench-epilog-") as tmp:
        tmp_path = Path(tmp)
        etc = tmp_path / "etc"
        (etc / "epilog.d").mkdir(parents=True)
        shutil.copy(WRAPPER, etc / "tailscope-jobs")
        shutil.copy(WRAPPER.parent / "tailscope-slurm.sh", etc)  # the wrappers' shared part, beside it
        (etc / "epilog.d" / "tailscope-jobs").symlink_to(etc / "tailscope-jobs")
        history = args.history or tmp_path / "history"
        apps, output = _figures_job(tmp_path)
        conf = (
            f"PYTHON={sys.executable}\nPYTHONPATH={ROOT / 'src'}\nHISTORY={history}\n"
            f"ARGS=--state-dir {tmp_path / 'state'} --apps {apps}"
        )
        prolog_conf, epilog_conf = conf + "\n", conf + ("\n" if store else " --print\n")
        owner = output.parent.stat()
        tagged = {"SLURM_JOB_COMMENT": "tailscope:rate", "SLURM_JOB_STDOUT": f"{output.parent}/out-%j.txt",
                  "SLURM_JOB_WORK_DIR": str(output.parent), "SLURM_JOB_UID": str(owner.st_uid),
                  "SLURM_JOB_GID": str(owner.st_gid), "SLURM_NODELIST": "bench1"}  # fmt: skip
        link = str(etc / "epilog.d" / "tailscope-jobs")
        load_before = os.getloadavg()
        times: dict[str, list[tuple[float, float]]] = {"peer": [], "prolog": [], "epilog": [], "figures": []}
        figure_jobs: list[str] = []
        reported: list[tuple[float, float]] = []
        failures = 0
        said: list[str] = []
        for i in range(args.rounds + 1):
            job = {"SLURM_JOB_ID": str(1000 + i), "SLURMD_NODENAME": "bench1", "SLURM_CLUSTER_NAME": "bench"}
            peer = spawn([sys.executable, "-c", "pass"], {})
            (etc / "tailscope-jobs.conf").write_text(prolog_conf)
            prolog = spawn(["/bin/sh", link], {**job, "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"})
            (etc / "tailscope-jobs.conf").write_text(epilog_conf)
            epilog = spawn(["/bin/sh", link], {**job, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"})
            figure_job = {**job, **tagged, "SLURM_JOB_ID": str(5000 + i)}
            os.link(output, output.parent / f"out-{5000 + i}.txt")
            figures = spawn(["/bin/sh", link], {**figure_job, "SLURM_SCRIPT_CONTEXT": "epilog_slurmd"})
            failures += sum(1 for run in (prolog, epilog, figures) if run[2] != 0)
            said += prolog[4] + epilog[4] + figures[4]
            if i == 0:
                continue
            figure_jobs.append(str(5000 + i))
            times["peer"].append(peer[:2])
            times["prolog"].append(prolog[:2])
            times["epilog"].append(epilog[:2])
            times["figures"].append(figures[:2])
            if not store and epilog[3].strip():
                record = json.loads(epilog[3])
                reported.append((record["epilog_wall_s"], record["epilog_cpu_s"]))
        load_after = os.getloadavg()
        stored = len(list((history / "").glob("**/*"))) if store and history.exists() else None
        with_figure = None
        if store:
            from tailscope.jobs.store import read_epilog

            records, _ = read_epilog(str(history))
            with_figure = sum(1 for r in records if r["job_id"] in figure_jobs and r.get("figures"))

    peer_wall = statistics.median(w for w, _ in times["peer"])
    peer_cpu = statistics.median(c for _, c in times["peer"])
    print(f"{args.rounds} rounds; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    header = ("", "wall median", "wall max", "x peer", "CPU median", "CPU max", "x peer")
    print("{:8} {:>12} {:>9} {:>7} {:>11} {:>8} {:>7}".format(*header))
    for part, runs in times.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(
            f"{part:8} {statistics.median(walls):>10.3f} s {max(walls):>7.3f} s "
            f"{statistics.median(walls) / peer_wall:>7.1f} {statistics.median(cpus):>9.3f} s "
            f"{max(cpus):>6.3f} s {statistics.median(cpus) / max(peer_cpu, 1e-3):>7.1f}"
        )
    if reported:
        wall, cpu = statistics.median(w for w, _ in reported), statistics.median(c for _, c in reported)
        print(f"the epilog's own figures (its record's): wall median {wall:.3f} s, CPU {cpu:.3f} s")
    print(f"lines said by the prolog and epilog: {len(said)}")
    for line in sorted(set(said))[:5]:
        print(f"  {line}")
    print(
        "store:",
        "the jobs store (measured)"
        if store
        else "not installed: records printed, the store's part not measured",
    )
    if stored is not None:
        print(f"history files after the run: {stored}")
    if with_figure is not None:
        print(f"figures epilogs whose record holds the job's figure: {with_figure} of {len(figure_jobs)}")
    epilog_wall = max(w for part in ("epilog", "figures") for w, _ in times[part])
    epilog_cpu = max(c for part in ("epilog", "figures") for _, c in times[part])
    ok = epilog_wall < 2.0 and epilog_cpu < 1.0 and failures == 0
    verdict = "met" if ok else "MISSED"
    print(
        f"target (every round): epilog wall < 2 s: max {epilog_wall:.3f} s; CPU < 1 s: max {epilog_cpu:.3f}"
        f" s; non-zero exits: {failures} -> {verdict}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
