"""The site's own jobs as the ensemble (issue 32): Slurm accounting records and a per-job epilog.

- `epilog`: `tailscope jobs prolog` / `jobs epilog HISTORY`, run by slurmd on every node of every job: the
  node's cheap evidence over the job's span, appended under the job id (within a hard time bound, always
  exit 0).
"""
