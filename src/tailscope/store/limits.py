"""The store's limits that argument parsing checks too, in a module that imports nothing heavy."""

# Trials per (node, variant) a plan may ask for: far beyond any real campaign, far below what would exhaust
# memory while planning (the runner lists pending trials).
MAX_TRIALS = 1_000_000
