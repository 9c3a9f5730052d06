"""Campaign spec, generated scripts, collect/resume bookkeeping, verdict outputs; no Slurm daemon needed."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

from spec_examples import CLUSTER_SPEC
from tailscope.campaign import slurm
from tailscope.campaign.spec import SpecError, load_spec
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect
from tailscope.verbs.verdict import verdict as cmd_verdict

from .fleet import fleet_frame, spec_fleet, write_frame


def _spec(tmp_path: Path, text: str = CLUSTER_SPEC) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_spec_is_parsed_with_paths_options_and_settings(tmp_path):
    spec = load_spec(_spec(tmp_path))
    assert spec.directory == (tmp_path / "camp").resolve()
    (entry,) = spec.probes
    assert entry.trials == 4 and entry.variant.params == {"page_policy": "2m", "sums": 50, "cpus": "0-1"}
    assert spec.cluster.alpha_drain == 0.01 and spec.cluster.bins == 2 and spec.cluster.alpha_retest == 0.10
    assert spec.nodelist == "c[0000-0004]" and spec.steps == "parallel"


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [  # line: the changed line of CLUSTER_SPEC
        (("trials = 4", "trials = 0"), 13, "probes.trials: expected the trials per node"),
        (("sums = 50", "sumz = 50"), 15, "probes.sumz: l2sum has no option 'sumz'"),
        (('time_limit = "00:30:00"', 'time_limit = "half an hour"'), 8, "slurm.time_limit"),
        (("alpha_drain = 0.01", "alpha_drain = 2"), 18, "cluster.alpha_drain: expected a number in [0, 1)"),
        (('page = "2m"', 'page = "3m"'), 14, "probes.page: expected one of"),
        (("[corunner]", "[corunners]"), 21, "corunners: unknown section"),
        (('nodes = "c[0000-0004]"', "nodes = = 1"), 6, "not valid TOML"),
        (('nodes = "c[0000-0004]"', "node_count = true"), 6, "slurm.node_count: expected a whole number"),
    ],
)
def test_spec_errors_name_file_line_and_key(tmp_path, change, line, words):
    path = _spec(tmp_path, CLUSTER_SPEC.replace(*change))
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert str(err.value).startswith(f"{path}:{line}: ") and words in str(err.value)


def test_scripts_allocate_exclusively_and_bind_one_step_per_node(tmp_path):
    spec = load_spec(_spec(tmp_path))
    campaign, job, script = slurm.submit(spec, dry_run=True)
    assert job is None
    text = script.read_text()
    for directive in ("--exclusive", "--nodelist=c[0000-0004]", "--partition=batch", "--constraint=skx",
                      "--time=00:30:00", "--account=ops", "--ntasks-per-node=1"):  # fmt: skip
        assert f"#SBATCH {directive}\n" in text
    assert 'srun --nodes=1 --ntasks=1 --nodelist="$node" --exact' in text and "--cpu-bind=cores" in text
    assert 'bash "$step" &' in text  # parallel steps
    step = (campaign.root / "slurm" / "step.sh").read_text()
    assert "-m tailscope run --resume --campaign" in step and '--node "$node"' in step
    assert "c0001) corunner='stress-ng --cpu 1' ;;" in step
    subprocess.run(["bash", "-n", str(script)], check=True)
    subprocess.run(["bash", "-n", str(campaign.root / "slurm" / "step.sh")], check=True)
    assert campaign.manifest.plans[0].trials == 4
    # Submitting twice does not grow the plan (every step runs `run --resume`).
    campaign, _, _ = slurm.submit(spec, dry_run=True)
    assert campaign.manifest.plans[0].trials == 4


def test_step_script_stores_trials_of_a_terminated_runner(tmp_path):
    """The co-runner branch: SIGTERM to the whole step leaves the runner time to store; co-runner ends."""
    sleeper = CLUSTER_SPEC.replace('c0001 = "stress-ng --cpu 1"', 'c0001 = "sleep 299.125"')
    spec = load_spec(_spec(tmp_path, sleeper))
    campaign = slurm.prepare(spec)
    text = (campaign.root / "slurm" / "step.sh").read_text()
    fake = tmp_path / "fake_runner.sh"
    fake.write_text(
        "#!/bin/bash\ntrap 'sleep 0.3; echo stored > \"$0.done\"; exit 130' TERM\nsleep 30 & wait\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    runner_line = next(
        line for line in text.splitlines() if "-m tailscope run" in line and line.endswith("&")
    )
    script = tmp_path / "step.sh"
    script.write_text(text.replace(runner_line, f"{fake} &"))
    env = dict(os.environ, SLURMD_NODENAME="c0001")
    proc = subprocess.Popen(["setsid", "bash", str(script)], env=env)
    import time

    time.sleep(0.5)
    os.killpg(proc.pid, 15)  # what slurmstepd does to every process of the step
    assert proc.wait(timeout=10) == 130
    assert Path(f"{fake}.done").read_text() == "stored\n"
    assert subprocess.run(["pgrep", "-f", "sleep 299.125"], capture_output=True).returncode == 1


def _fleet_campaign(tmp_path: Path, *, slow: int | None = 2) -> Campaign:
    factor = np.ones(5)
    if slow is not None:
        factor[slow] = 0.8
    return spec_fleet(_spec(tmp_path), factor, 4, 0.005, np.random.default_rng(9))


def test_collect_quarantines_a_damaged_chunk_and_resume_names_its_trials(tmp_path):
    campaign = _fleet_campaign(tmp_path)
    shards = campaign.shard_files("runs")
    assert len(shards) == 5
    damaged = shards[3]
    damaged.write_bytes(damaged.read_bytes()[:100])  # truncated by a crash
    result = slurm.collect(campaign)
    assert [b.path for b in result.bad] == [damaged]
    # the whole chunk goes aside: its shard and the commit record that named it
    assert campaign.root / "quarantine" / "runs" / damaged.name in result.quarantined
    assert [p.parent.name for p in result.quarantined] == ["commits", "runs"]
    nodes = {p.node: p for p in result.nodes}
    assert set(nodes) == {f"c000{i}" for i in range(5)}
    assert nodes["c0003"].done == 0 and all(nodes[f"c000{i}"].done == 4 for i in (0, 1, 2, 4))
    todo, job = slurm.resume(campaign, dry_run=True)
    assert job is None and [p.node for p in todo] == ["c0003"]
    assert todo[0].missing == {campaign.manifest.plans[0].variant: [0, 1, 2, 3]}
    resume_script = sorted((campaign.root / "slurm").glob("resume-*.sh"))[-1].read_text()
    assert "#SBATCH --nodelist=c0003\n" in resume_script and "#SBATCH --nodes=1\n" in resume_script


def test_trials_are_counted_once_when_two_attempts_overlap(tmp_path):
    campaign = _fleet_campaign(tmp_path, slow=None)
    rng = np.random.default_rng(2)
    again = fleet_frame(np.ones(1), 4, 0.005, rng)  # node c0000 written a second time by another writer
    again["variant"] = campaign.manifest.plans[0].variant
    write_frame(campaign, again.assign(node="c0000").assign(run_id=[f"x{i}" for i in range(4)]), task="again")
    con = connect(campaign)
    assert con.execute("SELECT count(*) FROM runs_all WHERE node = 'c0000'").fetchone()[0] == 8
    assert con.execute("SELECT count(*), count(DISTINCT (node, trial)) FROM runs").fetchone() == (20, 20)
    assert all(p.done == 4 and not p.missing for p in slurm.progress(campaign))


def _verdict(campaign: Campaign, **options) -> argparse.Namespace:
    base = {"campaign": campaign.root, "nhc": False, "node": None, "drain": False, "apply": False,
            "prometheus": None}  # fmt: skip
    return argparse.Namespace(**(base | options))


def test_verdict_outputs_name_the_slow_node(tmp_path, capsys):
    campaign = _fleet_campaign(tmp_path, slow=2)
    assert cmd_verdict(_verdict(campaign, nhc=True, node="c0002")) == 1
    out = capsys.readouterr().out
    assert re.match(
        r"ERROR:  nhc:  Health check failed:  check_tailscope:  c0002: l2sum 2\d(\.\d)?% slower", out
    )
    assert cmd_verdict(_verdict(campaign, nhc=True, node="c0000")) == 0
    assert capsys.readouterr().out == ""
    assert cmd_verdict(_verdict(campaign, drain=True)) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("scontrol")]
    assert re.match(
        r"scontrol update nodename=c0002 state=drain 'reason=tailscope: l2sum 2\d(\.\d)?% slower.*'$", line
    )
    words = shlex.split(line)  # the printed line is one command of exactly these words when pasted
    assert words[:4] == ["scontrol", "update", "nodename=c0002", "state=drain"] and len(words) == 5
    prom = tmp_path / "textfile" / "tailscope.prom"
    assert cmd_verdict(_verdict(campaign, prometheus=prom)) == 0
    text = prom.read_text()
    assert (
        f'tailscope_node_drain{{node="c0002",probe="l2sum",variant="{campaign.manifest.plans[0].variant}"'
        in text
    )
    assert text.count("# TYPE tailscope_node_drain gauge") == 1
    samples = [x for x in text.splitlines() if x.startswith("tailscope_node_drain{")]
    assert len(samples) == 5 and sum(int(x.rsplit(" ", 1)[1]) for x in samples) == 1
    assert [p.name for p in prom.parent.iterdir()] == ["tailscope.prom"]  # no temporary file left


def test_campaign_event_set_goes_to_every_probe_without_its_own(tmp_path):
    text = CLUSTER_SPEC.replace("[cluster]", '[events]\nset = "software"\n\n[cluster]')
    (entry,) = load_spec(_spec(tmp_path, text)).probes
    assert entry.variant.params["events"] == "software"
    text = text.replace('cpus = "0-1" }', 'cpus = "0-1", events = "other" }')
    (entry,) = load_spec(_spec(tmp_path, text)).probes
    assert entry.variant.params["events"] == "other"


def test_report_has_a_cluster_section_naming_the_drained_node(tmp_path):
    from tailscope.analysis.model import Settings
    from tailscope.verbs.workflow import analyze_campaign, write_report

    campaign = _fleet_campaign(tmp_path, slow=2)
    analysis = analyze_campaign(campaign.root, Settings())
    html = write_report(campaign.root, analysis, tmp_path / "r.html").read_text()
    section = html[html.index('<h2 id="cluster">') :]
    assert "Drain: <b>c0002</b>" in section and "Speed bins" in section and "1-(1-p)^N" in section
    # One Fig. 9, in the variant's section, coloured by the screen's verdict.
    assert html.count('data-figure="nodes"') == 1 and 'data-figure="cluster-nodes"' not in html
    spec = html[html.index('data-figure="nodes"') :]
    spec = spec[spec.index('type="application/json"') : spec.index("</script>")]
    assert '"name":"drain (1): median, bar min to max"' in spec and '"c0002"' in spec
    two = analysis.__class__(**{**analysis.__dict__, "cluster": ()})
    from tailscope.report.cluster_section import render_cluster_section

    assert render_cluster_section(two) == ""


def test_cli_rejects_a_bad_spec_with_file_line_and_exit_2(tmp_path, capsys):
    from tailscope.cli import main

    path = _spec(tmp_path, CLUSTER_SPEC.replace("trials = 4", "trials = -1"))
    assert main(["campaign", "submit", str(path), "--dry-run"]) == 2
    assert f"{path}:13: probes.trials: expected" in capsys.readouterr().err
    assert not (tmp_path / "camp").exists()
