"""#SBATCH lines of a campaign whose directory has a space, a quote or a backslash: the value is one
double-quoted word as sbatch reads it (checked with the real sbatch's parser), and a control character is
refused (it would end the directive and start a line of the script)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tailscope.campaign import slurm
from tailscope.campaign.slurm import SlurmError, directive
from tailscope.campaign.spec import load_spec

SPEC = """\
[campaign]
directory = "{directory}"

[slurm]
partition = "batch"
node_count = 1

[[probes]]
probe = "l2sum"
trials = 2
"""


@pytest.mark.parametrize(
    ("value", "line"),
    [("/scratch/runs/job-%j.out", "--output=/scratch/runs/job-%j.out"),
     ("/scratch/my runs/job-%j.out", '--output="/scratch/my runs/job-%j.out"'),
     ('/scratch/a"b\\c/job', '--output="/scratch/a\\"b\\\\c/job"')],
)  # fmt: skip
def test_directive_quotes_what_sbatch_would_split(value, line):
    assert directive("--output", value) == line


def test_control_characters_are_refused():
    with pytest.raises(SlurmError, match=r"--output /a\\x0a#SBATCH --uid=0: a control character"):
        directive("--output", "/a\n#SBATCH --uid=0")


def test_batch_script_of_a_directory_with_a_space_is_read_by_sbatch(tmp_path):
    spec_path = tmp_path / "spec.toml"
    spec_path.write_text(SPEC.format(directory=str(tmp_path / "my runs" / 'c"1')).replace('"1', '\\"1'))
    spec = load_spec(spec_path)
    campaign, _, script = slurm.submit(spec, dry_run=True)
    text = script.read_text()
    output = f"{campaign.root}/slurm/job-%j.out".replace('"', '\\"')
    assert f'#SBATCH --output="{output}"\n' in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        pytest.skip("no sbatch here: the quoting is checked against Slurm's parser where it is installed")
    # A configuration naming a controller that is not running: sbatch reads every #SBATCH line, then fails
    # to connect; a line it cannot read fails before that ("Invalid directive found in batch script").
    conf = tmp_path / "slurm.conf"
    conf.write_text(
        "ClusterName=t\nSlurmctldHost=localhost\nSlurmctldPort=1\nNodeName=n1 CPUs=1\n"
        "PartitionName=batch Nodes=n1\nMessageTimeout=1\nTCPTimeout=1\n"  # no 9 s of retries
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    proc = subprocess.run([sbatch, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0 and "Invalid directive" not in proc.stderr, proc.stderr
    assert "Unable to contact slurm controller" in proc.stderr, proc.stderr
    bad = script.with_name("unquoted.sh")
    bad.write_text(text.replace(f'--output="{output}"', f"--output={campaign.root}/slurm/job-%j.out"))
    proc = subprocess.run([sbatch, str(bad)], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0 and "contact slurm controller" not in proc.stderr, proc.stderr  # unread
