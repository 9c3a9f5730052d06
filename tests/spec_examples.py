"""Valid Slurm campaign specs, as a user writes them.

CLUSTER_SPEC: five nodes c0000-c0004, one l2sum probe with options, [cluster] settings and a co-runner on
c0001 (test_campaign_files asserts its values and line numbers). FLEET_SPEC: the same campaign under a name
of its own and with [thresholds], every section the spec knows: what the fuzzers mutate."""

CLUSTER_SPEC = """\
[campaign]
directory = "camp"

[slurm]
partition = "batch"
nodes = "c[0000-0004]"
constraint = "skx"
time_limit = "00:30:00"
sbatch_options = ["--account=ops"]

[[probes]]
probe = "l2sum"
trials = 4
page = "2m"
options = { sums = 50, cpus = "0-1" }

[cluster]
alpha_drain = 0.01
bins = 2

[corunner]
c0001 = "stress-ng --cpu 1"
"""

FLEET_SPEC = (
    CLUSTER_SPEC.replace('directory = "camp"\n', 'directory = "campaigns/fleet"\nname = "fleet"\n')
    + "\n[thresholds]\nmax_slow_rate = 0.01\n"
)
