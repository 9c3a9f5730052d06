"""Node names are data, never syntax: `verdict --drain` passes scontrol one plain node per call and refuses
names scontrol would read as a host list (`a,b`, `c[1-8]`, `ALL`); every printed name shows its control
characters as escapes (`verdict --nhc`, `analyze --verbose`, the drain lines)."""

from __future__ import annotations

import csv
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from tailscope.cli import main
from tailscope.report.drain import drain_plan, plain_node

HEALTHY = [f"c{i:04d}" for i in (1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14)]
HOSTILE = ["c[0001-0008]", "ALL", "c0004,c0005", "n\x1b[31mred", "all"]
SLOW = ["c0009", *HOSTILE]


ESC_NODE, ESC_UNIT = "n\x1b[31mred", "GB\x1b[1m/s"  # import refuses them now; older campaigns hold them


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """11 healthy nodes and 6 nodes 30% slower, 5 of them named with host-list syntax or an ESC. Imported
    with plain stand-ins for the ESC name and unit, then written again through the store's writer with the
    ESC in them, as a campaign written before import refused control characters holds them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tailscope.store.campaign import Campaign
    from tailscope.store.load import load_into
    from tailscope.store.read import read_table

    root = tmp_path_factory.mktemp("names")
    rng = np.random.default_rng(7)
    path = root / "it.csv"
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["node", "run", "iteration", "value", "unit"])
        for node in HEALTHY + SLOW:
            for run in range(8):
                for it in range(5):
                    value = 100 * (0.7 if node in SLOW else 1.0) * (1 + rng.normal(0, 0.005))
                    name = "n-esc-red" if node == ESC_NODE else node
                    out.writerow([name, run, it, f"{value:.4f}", "GB-esc/s"])
    assert (
        main(["import", "iterations", str(path), "--campaign", str(root / "plain"), "--higher-is-better"])
        == 0
    )
    plain = Campaign.open(root / "plain")
    runs = read_table(plain, "runs")
    for column, stand_in, real in (("node", "n-esc-red", ESC_NODE), ("unit", "GB-esc/s", ESC_UNIT)):
        fixed = pc.replace_substring(runs.column(column), stand_in, real)
        runs = runs.set_column(runs.schema.get_field_index(column), column, fixed)
    target = Campaign.create(root / "c")
    ids = pa.array([target.campaign_id] * runs.num_rows, pa.string())
    runs = runs.set_column(runs.schema.get_field_index("campaign"), "campaign", ids)
    with load_into(target.root, "test") as load:
        load.write_tables({"runs": runs, "iterations": read_table(plain, "iterations")}, node="all")
    assert pa.compute.any(pc.equal(runs.column("node"), ESC_NODE)).as_py()
    return root / "c"


def test_drain_lines_name_one_plain_node_each(campaign, capsys):
    capsys.readouterr()
    code = main(["verdict", str(campaign), "--drain"])
    out, err = capsys.readouterr()
    lines = [x for x in out.splitlines() if x.startswith("scontrol")]
    # the one plain slow node is drained, by its exact name; no hostile name reaches scontrol
    assert [x.split()[2] for x in lines] == ["nodename=c0009"]
    assert code == 1  # nodes it should drain but will not: not a clean result
    for name in ("c[0001-0008]", "ALL", "c0004,c0005", "n\\x1b[31mred", "all"):
        assert f"node {name} not drained: not a plain host name" in err
    assert "\x1b" not in out + err


def test_apply_runs_scontrol_once_per_plain_node(campaign, tmp_path, capsys, monkeypatch):
    """--apply with an scontrol that records its argv (no Slurm controller to drain nodes of here)."""
    log = tmp_path / "argv.log"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\nprintf "%s|" "$@" >> {log}\necho >> {log}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    capsys.readouterr()
    assert main(["verdict", str(campaign), "--drain", "--apply"]) == 1
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("update|nodename=c0009|state=drain|reason=tailscope: ")


def test_nhc_and_analyze_print_names_and_units_escaped(campaign, capsys):
    capsys.readouterr()
    assert main(["verdict", str(campaign), "--nhc", "--node", "n\x1b[31mred"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("ERROR:  nhc:  Health check failed:  check_tailscope:  n\\x1b[31mred: ")
    assert main(["verdict", str(campaign), "--nhc", "--node", "gone\x1b[2J"]) == 2
    err = capsys.readouterr().err
    assert "gone\\x1b[2J" in err and "\x1b" not in err
    main(["analyze", str(campaign), "--verbose"])
    out = capsys.readouterr().out
    assert "GB\\x1b[1m/s" in out and "\x1b" not in out  # the unit of the cluster line too


def test_the_prometheus_textfile_holds_names_and_units_escaped(campaign, tmp_path):
    """`verdict --prometheus`: a label holds the name as the terminal shows it (history's textfile did; the
    campaign's and the jobs' wrote the ESC raw: found on issue 30's acceptance pass)."""
    prom = tmp_path / "v.prom"
    assert main(["verdict", str(campaign), "--prometheus", str(prom)]) == 0
    text = prom.read_text()
    assert "\x1b" not in text
    assert 'node="n\\\\x1b[31mred"' in text and 'unit="GB\\\\x1b[1m/s"' in text  # printable, then escaped


@pytest.mark.parametrize(
    ("name", "plain"),
    [("c0001", True), ("node-1.cluster_a", True), ("ALL", False), ("All", False), ("c[1-2]", False),
     ("a,b", False), ("a b", False), ("", False), ("a\nb", False), ("a=b", False), ("ALLx", True)],
)  # fmt: skip
def test_plain_node_names(name, plain):
    assert plain_node(name) is plain
    plan = drain_plan([(name, 'slow "really"\x1b[2J')])
    assert len(plan.commands) == int(plain) and len(plan.refused) == int(not plain)
    if plain:
        assert plan.commands[0][2] == f"nodename={name}"
        assert plan.commands[0][4] == "reason=tailscope: slow 'really'\\x1b[2J"
