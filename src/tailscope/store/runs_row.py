"""The one builder of `runs` rows (store/schema.py RUNS), for every writer of one: the probe runner
(campaign/runner.py), the application trial (app/trial.py), trace, and every importer (importers/rows.py adds
the importers' own check: a node name, refused with the file:line it came from). A runs row has one shape
whatever wrote it: every column of RUNS, those not given null.

`run_row` builds one row, `runs_table` stages rows; `runs_columns` is run_row's columnar form, for a chunk
of one node's runs at once (a table of millions of runs is never a list of dicts): the columns that differ
per run as Arrow arrays, every other one checked by run_row itself and broadcast. `TrialRun` is one trial of
a variant as the runner runs it (its run id and start time, taken when it starts), whose row it builds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import pyarrow as pa

from tailscope.store.campaign import utcnow
from tailscope.store.schema import RUNS

_JSON = {"params", "config", "summary"}  # JSON text columns


def run_row(
    *,
    campaign: str,
    task: str,
    node: str,
    probe: str,
    variant: str,
    params: Mapping[str, Any] | str,
    trial: int,
    metric: str,
    value: float | None,
    unit: str,
    higher_is_better: bool,
    source: str,
    status: str = "ok",
    run_id: str | None = None,
    started_at: datetime | None = None,
    **columns: Any,
) -> dict[str, Any]:
    """One `runs` row, every column of RUNS (those not given null); any other column is given by its name
    (wall_s, cpus, tsc_start, config ...). `params`, `config` and `summary` are JSON text, or a value stored
    as JSON with sorted keys. A name that is no runs column is refused, and so is an ok run with no value."""
    unknown = set(columns) - set(RUNS.names)
    if unknown:
        raise TypeError(f"run_row: no runs column {sorted(unknown)}")
    if status == "ok" and value is None:
        raise ValueError("run_row: an ok run needs a value")
    given = {
        **columns,
        "run_id": run_id or uuid.uuid4().hex,
        "campaign": campaign,
        "node": node,
        "probe": probe,
        "variant": variant,
        "params": params,
        "trial": trial,
        "started_at": started_at or utcnow(),
        "metric": metric,
        "value": value,
        "unit": unit,
        "higher_is_better": higher_is_better,
        "status": status,
        "source": source,
        "task": task,
    }
    return {name: _json(given.get(name)) if name in _JSON else given.get(name) for name in RUNS.names}


def _json(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(dict(value) if isinstance(value, Mapping) else value, sort_keys=True)


def runs_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """The rows as an Arrow table of the runs schema."""
    return pa.Table.from_pylist(list(rows), schema=RUNS.schema)


def runs_columns(per_run: pa.Table, **fields: Any) -> pa.Table:
    """`run_row`'s columnar form: the columns of `per_run` (run_id, trial, value, summary ...) differ per run,
    every other one is given in `fields` as run_row takes it, one value for all. The checks are run_row's: it
    builds the first run's row, whose constants are broadcast (and an ok chunk needs every value)."""
    n = per_run.num_rows
    if n == 0:
        return RUNS.schema.empty_table()
    row = run_row(**fields, **per_run.slice(0, 1).to_pylist()[0])
    if row["status"] == "ok" and "value" in per_run.column_names and per_run.column("value").null_count:
        raise ValueError("runs_columns: an ok run needs a value")
    columns = []
    for f in RUNS.schema:
        if f.name in per_run.column_names:
            columns.append(per_run.column(f.name).cast(f.type))
        elif row[f.name] is None:
            columns.append(pa.nulls(n, f.type))
        else:
            columns.append(pa.repeat(pa.scalar(row[f.name], f.type), n))
    return pa.Table.from_arrays(columns, schema=RUNS.schema)


class Variant(Protocol):
    """What a runs row reads of the variant a trial ran (a probe's, probes/catalogue.py; an application's,
    app/variant.py)."""

    @property
    def probe(self) -> str: ...

    @property
    def variant_id(self) -> str: ...

    @property
    def params_json(self) -> str: ...


@dataclass(frozen=True)
class TrialRun:
    """One trial of a variant as the runner runs it (a probe's or an application's): who runs it, and the run
    id and start time it takes when it starts."""

    campaign: str
    node: str
    task: str
    variant: Variant
    trial: int
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: datetime = field(default_factory=utcnow)

    def row(self, **columns: Any) -> dict[str, Any]:
        """Its runs row, by run_row: the trial's identity and `columns` (metric, value, status ...)."""
        return run_row(
            run_id=self.run_id,
            campaign=self.campaign,
            node=self.node,
            task=self.task,
            probe=self.variant.probe,
            variant=self.variant.variant_id,
            params=self.variant.params_json,
            trial=self.trial,
            started_at=self.started_at,
            **columns,
        )
