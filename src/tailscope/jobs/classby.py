"""What makes two jobs the same work (`--class-by`): the fields a class is made of (classes.py reads them).
Without pandas: the command line's parser imports it."""

from __future__ import annotations

import re

from tailscope.errors import UsageError

# `#SBATCH --comment=tailscope:NAME`: the job's class (classes.py) and its application definition (output.py)
TAG = re.compile(r"(?:^|[\s,;])tailscope:([A-Za-z0-9_.+\-]{1,64})(?=$|[\s,;])")

CLASS_FIELDS = {  # --class-by name -> how to read it from the jobs table
    "user": "user_name", "name": "name", "nodes": "nnodes", "cpus_per_node": "cpus_per_node",
    "partition": "partition", "account": "account", "cluster": "cluster",
}  # fmt: skip
DEFAULT_CLASS_BY = ("user", "name", "nodes", "cpus_per_node", "partition")


def class_by_option(text: str) -> tuple[str, ...]:
    """`--class-by user,name,nodes`: checked names of CLASS_FIELDS."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in CLASS_FIELDS]
    if not names or bad:
        raise UsageError(
            f"--class-by {text!r}: expected a comma list of {', '.join(CLASS_FIELDS)} "
            f"(default {','.join(DEFAULT_CLASS_BY)})"
        )
    return tuple(dict.fromkeys(names))
