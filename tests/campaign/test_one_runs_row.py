"""A runs row has one shape whatever wrote it: a real probe trial, a real application trial and imported
trials (a program's output, an iterations CSV) all build theirs with the one builder, store/runs_row.py's
run_row: every column of RUNS, in its order, each value of its column's type."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa

import tailscope.importers.iterations_csv
import tailscope.importers.likwid_csv
import tailscope.importers.programs  # noqa: F401  (their run_row is watched too)
from tailscope.app.trial import run_app_trial
from tailscope.app.variant import AppVariant, app_params
from tailscope.campaign.runner import Trial, run_trial
from tailscope.cli import main
from tailscope.probes.catalogue import ProbeVariant
from tailscope.store import runs_row
from tailscope.store.campaign import Campaign
from tailscope.store.schema import RUNS

XHPL = Path(__file__).parents[1] / "importers" / "fixtures" / "xhpl-2.3-three-runs.out"


def _of_type(value: Any, kind: pa.DataType) -> bool:
    if value is None:
        return True
    if pa.types.is_string(kind):
        return isinstance(value, str)
    if pa.types.is_boolean(kind):
        return isinstance(value, bool)
    if pa.types.is_integer(kind):
        return isinstance(value, int) and not isinstance(value, bool)
    if pa.types.is_floating(kind):
        return isinstance(value, int | float) and not isinstance(value, bool)
    assert pa.types.is_timestamp(kind)
    return isinstance(value, dt.datetime) and value.tzinfo is not None


def test_every_writer_builds_its_runs_row_with_the_one_builder(tmp_path, monkeypatch, capsys):
    built: list[dict[str, Any]] = []
    one_builder = runs_row.run_row

    def watched(**fields: Any) -> dict[str, Any]:
        built.append(one_builder(**fields))
        return built[-1]

    for module in list(sys.modules.values()):  # every module that holds the builder, under any name
        for name, value in list(vars(module).items()):
            if value is one_builder:
                monkeypatch.setattr(module, name, watched)

    campaign = Campaign.create(tmp_path / "c")
    probe = ProbeVariant("l2sum", {"cpus": "0", "chunk_bytes": "256k", "sums": 40, "sums_per_iteration": 4})
    probe_rows = run_trial(campaign, Trial(probe, 0), node="n1", task="t", timeout_s=120)
    prints = [sys.executable, "-c", "print('gflops 7.5')"]
    app = AppVariant("app:hello", app_params(prints, metrics=[r"gflops:GF/s=gflops ([0-9.]+)"]))
    app_rows = run_app_trial(campaign, app, 0, node="n1", task="t", timeout_s=120, first=True)
    assert main(["import", "hpl", str(XHPL), "--campaign", str(tmp_path / "i"), "--node", "n1"]) == 0
    csv = tmp_path / "it.csv"
    csv.write_text("node,run,iteration,value,unit\nn1,a,0,2.0,s\nn1,a,1,4.0,s\nn2,b,0,3.0,s\n")
    assert main(["import", "iterations", str(csv), "--campaign", str(tmp_path / "i")]) == 0
    capsys.readouterr()

    # the runner's and the application's rows are the builder's own; imports went through it too
    assert probe_rows.runs[0] is built[0] and app_rows.runs[0] is built[1]
    assert (probe_rows.runs[0]["status"], app_rows.runs[0]["value"]) == ("ok", 7.5)
    # one row per trial of the hpl output, one (checked) row per node's chunk of the iterations CSV
    imported = [*["import:hpl"] * 3, *["import:iterations-csv"] * 2]
    assert [r["source"] for r in built] == ["probe", "app", *imported]
    for row in built:
        assert list(row) == RUNS.names, row["source"]
        wrong = {f.name: row[f.name] for f in RUNS.schema if not _of_type(row[f.name], f.type)}
        assert not wrong, (row["source"], wrong)
