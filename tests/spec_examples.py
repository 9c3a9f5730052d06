"""A valid Slurm campaign spec with every section filled, as a user writes one: what the fuzzers mutate."""

FLEET_SPEC = """\
[campaign]
directory = "campaigns/fleet"
name = "fleet"

[slurm]
nodes = "n[1-3]"
partition = "batch"
time_limit = "01:00:00"
sbatch_options = ["--account=ops"]

[[probes]]
probe = "l2sum"
trials = 50
page = "2m"
options = { sums = 50, cpus = "0-1" }

[thresholds]
max_slow_rate = 0.01

[cluster]
alpha_drain = 0.01

[corunner]
n2 = "stress-ng --cpu 1"
"""
