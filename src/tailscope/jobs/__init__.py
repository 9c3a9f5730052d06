"""The site's own jobs as the ensemble: which nodes make production jobs slow (`tailscope jobs`).

- `store`: the history's `jobs` and `job_evidence` tables, and `append_epilog` (the per-job epilog's record,
  cheap: no pyarrow or pandas on that path).
- `record`: the epilog record's fields and their checks.
- `sacct`: Slurm accounting records (`sacct -P`, live or a saved dump), parsed strictly.
- `classes`: job classes and slowdowns; `attribution`: slowdowns attributed to nodes; `show`, `report`:
  the answers.
- `epilog`: `tailscope jobs prolog` / `jobs epilog HISTORY`, run by slurmd on every node of every job: the
  node's cheap evidence over the job's span, appended under the job id (within a hard time bound, always
  exit 0).
"""
