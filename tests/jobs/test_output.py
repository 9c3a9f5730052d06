"""The epilog's figures of merit from a job's own output (jobs/output.py): Slurm's output file name patterns
expanded as Slurm 22.05's slurmstepd expanded them on this project's test cluster, the output read as the
job's user (a link to a root-only file and a FIFO refused, a 200 MB output read within the bound), only on
the job's first node and only for a job whose tag names a definition, and the record that carries it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from jobs_node_tree import tailscope

from tailscope.jobs import output
from tailscope.jobs.epilog import Bounded
from tailscope.jobs.output import JobOutput, OutputError, expand, output_path

NOBODY = 65534
DEFINITION = """name = "rate"
argv = ["./bench"]
metrics = ["rate:it/s:higher=rate: ([0-9.]+) it/s", "loop:s=Loop time ([0-9.]+)"]
sanity = "done"
"""


def _job(**more: object) -> JobOutput:
    base: dict = dict(
        job_id="2", node="n1", comment="tailscope:rate", stdout=None, work_dir="/w", uid=0, gid=0,
        user="root", name=None, array_job=None, array_task=None, nodelist="n1",
    )  # fmt: skip
    base.update(more)
    return JobOutput(**base)


# SLURM_JOB_STDOUT as the epilog was given it, and the file slurmstepd wrote, on Slurm 22.05.8 (sbatch -o ...)
SLURM_2205 = [
    ("/tmp/jobs2/out-%j-%x-%N.txt", dict(job_id="1", name="fig|x"), "vm", "/tmp/jobs2/out-1-fig|x-vm.txt"),
    (
        "/tmp/jobs2/o-%J-%s-%n-%t-%u-%3j-%%-%A-%a-%b-%5a-%x.txt",  # task 4 of array 2 (job id 2)
        dict(job_id="2", name="arr", array_job="2", array_task="4"),
        "vm",
        "/tmp/jobs2/o-2-batch-0-0-root-002-%-2-4-%b-00004-arr.txt",
    ),
    ("/tmp/jobs2/o\\-%j.txt", dict(job_id="3"), "vm", "/tmp/jobs2/o-%j.txt"),  # a backslash: not expanded
]


@pytest.mark.parametrize(("pattern", "job", "host", "written"), SLURM_2205)
def test_output_names_as_slurm_wrote_them(tmp_path, pattern, job, host, written) -> None:
    found, name = expand(pattern, _job(**job), host)
    if name is None:
        assert found == written
    else:  # %b: a digit in later versions, kept as written by 22.05
        assert found == "/tmp/jobs2/" and name.fullmatch(Path(written).name)
        assert name.fullmatch(Path(written).name.replace("%b", "4"))


def test_a_part_the_epilog_is_not_told_finds_the_one_file_it_can_be(tmp_path) -> None:
    """Slurm 22.05 gives the epilog no SLURM_JOB_NAME: `%x-%j.out` is the one file of its directory with the
    job's id where the name goes."""
    (tmp_path / "lammps-12.out").write_text("x")
    (tmp_path / "lammps-123.out").write_text("x")
    (tmp_path / "other-13.out").write_text("x")
    job = _job(job_id="12", stdout=f"{tmp_path}/%x-%j.out")
    assert output_path(job) == tmp_path / "lammps-12.out"
    named = _job(job_id="12", name="lammps", stdout=f"{tmp_path}/%x-%j.out")  # Slurm 23.02+ gives the name
    assert output_path(named) == tmp_path / "lammps-12.out"
    (tmp_path / "again-12.out").write_text("x")
    with pytest.raises(OutputError, match=r"2 files named as .* could be"):
        output_path(job)
    with pytest.raises(OutputError, match="no file named as"):
        output_path(_job(job_id="99", stdout=f"{tmp_path}/%x-%j.out"))
    with pytest.raises(OutputError, match="in a directory named by a part the epilog is not told"):
        output_path(_job(stdout=f"{tmp_path}/%x/%j.out"))
    # sbatch's default, in the job's working directory, when Slurm gives no SLURM_JOB_STDOUT
    assert output_path(_job(job_id="7", work_dir=str(tmp_path))) == tmp_path / "slurm-7.out"
    assert output_path(_job(job_id="7", stdout="rel/%j.log", work_dir="/w")) == Path("/w/rel/7.log")


def _apps(tmp_path: Path) -> Path:
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "rate.toml").write_text(DEFINITION)
    return apps


def _read(job: JobOutput, apps: Path, seconds: float = 30) -> dict:
    """read_figures in a forked process, as the epilog runs it."""
    definition = output.definition_for(job, apps)
    assert definition is not None
    return Bounded(lambda: output.read_figures(job, definition, time.monotonic() + seconds)).answer(
        time.monotonic() + seconds
    )


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="becoming the job's user needs root")


@needs_root
def test_the_output_is_read_as_the_jobs_user(tmp_path, nobody_dir) -> None:
    apps, work = _apps(tmp_path), nobody_dir
    secret = work.parent / "secret"
    secret.write_text("rate: 1 it/s\ndone\n")  # root's, 0600: what a link to /etc/shadow would reach
    secret.chmod(0o600)
    (work / "out-5.txt").symlink_to(secret)
    job = _job(job_id="5", stdout=f"{work}/out-%j.txt", uid=NOBODY, gid=NOBODY, user="nobody")
    answer = _read(job, apps)
    assert answer["figures"] == {} and answer["errors"] == [f"figures: {work}/out-5.txt: Permission denied"]
    os.mkfifo(work / "out-6.txt")  # no writer: an open that waited would hang the reader
    began = time.monotonic()
    answer = _read(_job(job_id="6", stdout=f"{work}/out-%j.txt", uid=NOBODY, gid=NOBODY), apps)
    assert answer["errors"] == [f"figures: {work}/out-6.txt: a FIFO, not a regular file"]
    assert time.monotonic() - began < 10
    mine = work / "out-7.txt"
    mine.write_text("start\nrate: 12.5 it/s\nLoop time 3.2\ndone\n")
    os.chown(mine, NOBODY, NOBODY)
    mine.chmod(0o600)  # readable by its owner only: read as the job's user, as on NFS with root_squash
    answer = _read(_job(job_id="7", stdout=f"{work}/out-%j.txt", uid=NOBODY, gid=NOBODY), apps)
    assert answer["errors"] == []
    assert answer["figures"] == {
        "rate": {"value": 12.5, "higher_is_better": True, "unit": "it/s"},
        "loop": {"value": 3.2, "higher_is_better": False, "unit": "s"},
    }


def test_only_the_tail_of_a_big_output_is_read(tmp_path) -> None:
    apps = _apps(tmp_path)
    big = tmp_path / "big-8.out"
    with open(big, "w") as f:
        f.write("rate: 1 it/s\n")  # early, and past the tail: not the figure
        line = "x" * 99 + "\n"
        for _ in range(20):
            f.write(line * 100_000)  # 200 MB in all
        f.write("rate: 99 it/s\nLoop time 1.5\ndone\n")
    began = time.monotonic()
    answer = _read(_job(job_id="8", stdout=str(big)), apps)
    took = time.monotonic() - began
    assert answer["figures"]["rate"]["value"] == 99.0 and answer["errors"] == []
    print(f"a 200 MB output's figures read in {took:.2f} s")
    assert took < 10  # its last MiB alone is read


def test_what_is_read_where(tmp_path) -> None:
    apps = _apps(tmp_path)
    assert output.definition_for(_job(nodelist="n[1-4]", node="n1"), apps) == apps / "rate.toml"
    assert output.definition_for(_job(nodelist="n[1-4]", node="n2"), apps) is None  # not its batch host
    assert output.definition_for(_job(comment="tailscope:nope"), apps) is None  # a class tag only
    assert output.definition_for(_job(comment="run 4"), apps) is None
    assert output.definition_for(_job(), None) is None  # the site gave no --apps
    (apps / "bad.toml").write_text('metrics = ["x=("]\n')
    answer = _read(_job(comment="tailscope:bad"), apps)
    assert answer["figures"] == {} and "bad.toml:1: metrics: --metric 'x=('" in answer["errors"][0]
    # metric_file: a file inside the job's working directory, never outside it
    (apps / "mf.toml").write_text('metrics = ["rate:higher=rate: ([0-9.]+)"]\nmetric_file = "log/perf.txt"\n')
    (tmp_path / "w" / "log").mkdir(parents=True)
    (tmp_path / "w" / "log" / "perf.txt").write_text("rate: 4\n")
    answer = _read(_job(comment="tailscope:mf", work_dir=str(tmp_path / "w")), apps)
    assert answer["figures"]["rate"]["value"] == 4.0
    (tmp_path / "w" / "log" / "perf.txt").unlink()
    (tmp_path / "w" / "log" / "perf.txt").symlink_to(apps / "rate.toml")
    answer = _read(_job(comment="tailscope:mf", work_dir=str(tmp_path / "w")), apps)
    assert answer["figures"] == {} and "leads out of the directory" in answer["errors"][0]


def test_a_reader_cut_at_the_deadline_leaves_the_record_without_figures(tmp_path) -> None:
    from tailscope.evidence import nodespan
    from tailscope.jobs.epilog import SlurmJob, epilog_record

    hung = Bounded(lambda: time.sleep(60) or {})
    began = time.monotonic()
    record = epilog_record(
        SlurmJob("9", "n1", None, None),
        nodespan.Roots(),
        tmp_path / "state",
        started=began,
        parent_cpu_s=0.0,
        until=began + 1.0,
        own_pids={os.getpid()},
        figures=hung,
    )
    assert time.monotonic() - began < 5
    assert "figures" not in record
    assert "figures: the job's output was not read in time; none recorded" in record["errors"]


def test_the_epilog_records_a_tagged_jobs_figures(tmp_path) -> None:
    apps = _apps(tmp_path)
    out = tmp_path / "job-42.out"
    out.write_text("rate: 7.5 it/s\nLoop time 2\ndone\n")
    history = tmp_path / "H"
    env = {
        "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "n1", "SLURM_NODELIST": "n[1-2]",
        "SLURM_JOB_COMMENT": "tailscope:rate", "SLURM_JOB_STDOUT": str(tmp_path / "job-%j.out"),
        "SLURM_JOB_UID": str(os.getuid()), "SLURM_JOB_GID": str(os.getgid()),
        "SLURM_JOB_WORK_DIR": str(tmp_path),
    }  # fmt: skip
    state = str(tmp_path / "state")
    for node in ("n1", "n2"):
        proc = tailscope("jobs", "epilog", str(history), "--apps", str(apps), "--state-dir", state,
                         "--timeout", "60", env={**env, "SLURMD_NODENAME": node})  # fmt: skip
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    from tailscope.jobs.store import read_epilog

    records, damaged = read_epilog(str(history))
    assert damaged == []
    by_node = {r["node"]: r for r in records}
    assert by_node["n1"]["figures"] == {
        "rate": {"value": 7.5, "higher_is_better": True, "unit": "it/s"},
        "loop": {"value": 2.0, "higher_is_better": False, "unit": "s"},
    }
    assert "figures" not in by_node["n2"]  # the batch host alone reads the output
    json.dumps(records)  # as stored
