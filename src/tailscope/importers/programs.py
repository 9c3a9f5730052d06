"""`tailscope import FORMAT FILE` for a program's output (hpl, hpcc, lammps, gromacs, stream, npb, osu): the
file is fed line by line to a fresh reader of the one reader interface (importers/reader.py), and each
ProgramRun it returns becomes one trial through the one runs-row builder (store/runs_row.py).

Trials are grouped into variants by the run's params: `imported:<name>-k1v1-k2v2` (HPL: n nb p q; OSU: size),
probe `imported:<name>` (name: --name, else the format). The headline figure is the run's value; every other
figure is kept in its summary under "figures". A run the program marked wrong (HPL's FAILED residual) is
stored with status `invalid`, no value and no iteration. A file is imported once (sha256 of its bytes,
checked inside the campaign lock and again at commit).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from tailscope.importers import open_text
from tailscope.importers.reader import ProgramRun, program_reader
from tailscope.importers.rows import check_node
from tailscope.store.campaign import utcnow
from tailscope.store.load import Transaction
from tailscope.store.manifest import Plan
from tailscope.store.runs_row import run_row, runs_table
from tailscope.store.schema import TABLES


def variant_of(probe: str, params: Any) -> str:
    if not params:
        return probe
    return probe + "-" + "-".join(f"{k}{v}" for k, v in sorted(params.items()))


def read_program_file(format: str, path: Path) -> tuple[list[ProgramRun], str]:
    """The runs of `path` read by a fresh `format` reader, and the sha256 of its bytes."""
    reader = program_reader(format)
    with open_text(path) as lines:
        for number, line in lines:
            reader.feed(number, line)
        digest = lines.sha256.hexdigest()
    return reader.finish(str(path)), digest


def import_program(
    path: Path, load: Transaction, *, format: str, node: str, task: str, name: str | None = None
) -> dict[str, int]:
    """Read `path`, refuse a file already imported, stage its runs and iterations in `load`."""
    runs, digest = read_program_file(format, path)
    load.record_source(digest, str(path))
    probe = f"imported:{name or format}"
    count: dict[str, int] = {}
    for run in runs:
        variant = variant_of(probe, run.params)
        count[variant] = count.get(variant, 0) + 1
    next_trial = {v: load.claim_next_trials(node, v, n)[0] for v, n in count.items()}
    now = utcnow()
    rows: list[dict[str, Any]] = []
    iterations: dict[str, list[Any]] = {k: [] for k in ("run_id", "iteration", "warmup", "seconds", "value")}
    params_of: dict[str, dict[str, Any]] = {}
    for run in runs:
        variant = variant_of(probe, run.params)
        trial = next_trial[variant]
        next_trial[variant] = trial + 1
        params_of[variant] = dict(run.params)
        headline = run.figures[0]
        summary: dict[str, Any] = {"source_file": path.name, "line": run.first_line, **run.details}
        if len(run.figures) > 1:
            summary["figures"] = [
                {"name": f.name, "value": f.value, "unit": f.unit, "higher_is_better": f.higher_is_better}
                for f in run.figures[1:]
            ]
        row = run_row(
            campaign=load.campaign_id,
            task=task,
            node=check_node(node, f"{path}:{run.first_line}"),
            probe=probe,
            variant=variant,
            params=run.params,
            trial=trial,
            metric=headline.name,
            value=headline.value if run.valid else None,
            unit=headline.unit,
            higher_is_better=headline.higher_is_better,
            source=f"import:{format}",
            status="ok" if run.valid else "invalid",
            error=None if run.valid else run.reason,
            seconds=run.seconds,
            threads=run.threads,
            started_at=now,
            summary=json.dumps(summary),  # in the order written (the stored text as it always was)
        )
        rows.append(row)
        if run.valid:  # a wrong answer has no valid timing (no iterations after a failed check)
            single = len(run.iterations) == 1
            for i, value in enumerate(run.iterations):
                iterations["run_id"].append(row["run_id"])
                iterations["iteration"].append(i)
                iterations["warmup"].append(False)
                iterations["seconds"].append(run.seconds if single else None)
                iterations["value"].append(value)
    for variant, params in params_of.items():
        load.add_plan(Plan(variant, probe, params, next_trial[variant], imported=True))
    load.write("runs", runs_table(rows), node=node)
    load.write("iterations", pa.Table.from_pydict(iterations, schema=_iterations_schema()), node=node)
    return {
        "runs": len(rows),
        "invalid": sum(1 for r in runs if not r.valid),
        "variants": len(params_of),
    }


def _iterations_schema() -> pa.Schema:
    schema = TABLES["iterations"].schema
    return pa.schema([schema.field(n) for n in ("run_id", "iteration", "warmup", "seconds", "value")])
