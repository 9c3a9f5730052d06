"""Campaigns: running trials (runner.py), stopping them when settled (stopping.py), Slurm, specs."""

# DIR/stopping.json: how a campaign `check` stopped when settled had its trials stopped (stopping.py writes
# and reads it); here so that `analyze` of a campaign without one does not import the sequential rules.
STOPPING_RECORD = "stopping.json"
