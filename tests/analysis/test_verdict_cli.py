"""Exit codes and outputs of `analyze` and `verdict --nhc` on stored campaigns with evidence rows:
0 healthy, 1 degraded, 3 inconclusive, the same node verdict in both, and the limits changeable."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from evidence_fixtures import Ensemble, Trial, ensemble

from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES


def _table(frame: pd.DataFrame, name: str) -> pa.Table:
    schema = TABLES[name].schema
    frame = frame.reindex(columns=schema.names)
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return pa.Table.from_pylist(records, schema=schema)


def _store(root: Path, e: Ensemble) -> Path:
    campaign = Campaign.create(root)
    runs = e.runs.assign(campaign=campaign.campaign_id)
    tables = {
        "runs": _table(runs, "runs"),
        "iterations": _table(e.iterations, "iterations"),
        "counters": _table(e.counters, "counters"),
    }
    with load_into(campaign.root, "test") as load:
        load.write_tables(tables, node="n1")
    return root


WINDOW = {k: Trial(slowdown=0.41, others=0.43) for k in range(13, 22)}
BUSY = {k: Trial(slowdown=0.45 + 0.02 * (k % 3), others=0.48) for k in range(1, 41)}


@pytest.mark.parametrize(
    ("trials", "code", "state"),
    [({}, 0, "healthy"), (WINDOW, 1, "degraded"), (BUSY, 3, "inconclusive")],
    ids=["quiet", "window", "busy"],
)
def test_exit_codes_follow_the_node_verdict(tmp_path, capsys, trials, code, state):
    root = _store(tmp_path / "c", ensemble(trials))
    assert main(["analyze", str(root), "--json"]) == code
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["state"] == state and doc["nodes"][0]["verdict"] == state
    assert main(["analyze", str(root)]) == code
    out = capsys.readouterr().out
    assert f"verdict: {state.upper()}" in out and "PASS" not in out and "limits: slow-run rate" in out
    assert main(["verdict", str(root), "--nhc", "--node", "n1"]) == code
    nhc = capsys.readouterr()
    if state == "degraded":
        assert nhc.out.startswith("ERROR:  nhc:  Health check failed:  check_tailscope:  n1: cpu-contention")
    else:
        assert nhc.out == ""
    if state == "inconclusive":
        assert "tailscope: n1: inconclusive: too busy to judge" in nhc.err
    prom = tmp_path / "t.prom"
    assert main(["verdict", str(root), "--prometheus", str(prom)]) == 0
    lines = [x for x in prom.read_text().splitlines() if x.startswith("tailscope_node_verdict{")]
    assert sorted(x.rsplit(" ", 1)[1] for x in lines) == ["0", "0", "1"]
    assert f'tailscope_node_verdict{{node="n1",verdict="{state}",' in "\n".join(
        x for x in lines if x.endswith(" 1")
    )


def test_limits_are_changeable_and_shared(tmp_path, capsys):
    root = _store(tmp_path / "c", ensemble(BUSY))
    assert main(["analyze", str(root)]) == 3
    assert "too busy to judge" in capsys.readouterr().out
    # Allowing 60% busy: no longer too busy, but its runs (45-49% slow) are too noisy to judge instead.
    assert main(["analyze", str(root), "--max-busy-share", "0.6"]) == 3
    out = capsys.readouterr().out
    assert "too busy" not in out and "l2sum: too noisy to judge: runs vary by" in out
    window = _store(tmp_path / "w", ensemble(WINDOW))
    # 9 of 40 slow: the slow-rate, quantile and CV-ratio limits each fail; all off leaves nothing failing.
    off = ["--max-slow-rate", "off", "--max-q01-drop", "off", "--max-cv-ratio", "off"]
    assert main(["analyze", str(window), *off]) == 0
    assert main(["verdict", str(window), "--nhc", "--node", "n1", *off]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:  # argparse: usage error, exit 2
        main(["analyze", str(window), "--max-slow-rate", "x"])
    assert stop.value.code == 2
    assert "expected a number or 'off'" in capsys.readouterr().err
