"""`tailscope import iterations`: values, directions, and every kind of bad input (file:line, exit 2)."""

from __future__ import annotations

import pytest

from store_tools import stored
from tailscope.cli import main


def write(tmp_path, text: str, name: str = "hpl.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_rates_use_harmonic_mean_and_warmups_are_excluded(tmp_path, capsys):
    csv = write(
        tmp_path,
        "node,run,iteration,value,unit,warmup\n"
        "n1,a,0,1,GFLOPS,true\n"
        "n1,a,1,100,GFLOPS,false\n"
        "n1,a,2,50,GFLOPS,false\n"
        "n2,x,1,80,GFLOPS,false\n",
    )
    assert main(["import", "iterations", str(csv), "--campaign", str(tmp_path / "c")]) == 0
    assert "imported 2 runs (4 iterations, 2 nodes)" in capsys.readouterr().out
    got = stored(
        tmp_path / "c", "SELECT node, trial, value, unit, higher_is_better, probe FROM runs ORDER BY node"
    )
    # harmonic mean of 100 and 50 = 2 / (1/100 + 1/50) = 66.666...
    assert got[0][:2] == ("n1", 0) and got[0][2] == pytest.approx(200 / 3)
    assert got[0][3:] == ("GFLOPS", True, "imported:hpl")
    assert got[1][:3] == ("n2", 0, 80.0)
    its = stored(tmp_path / "c", "SELECT iteration, warmup, value FROM iterations ORDER BY value")
    assert its == [(0, True, 1.0), (2, False, 50.0), (1, False, 80.0), (1, False, 100.0)]


def test_times_use_arithmetic_mean_and_direction_from_unit(tmp_path):
    csv = write(tmp_path, "node,run,iteration,value,unit\nn1,r1,0,2.0,s\nn1,r1,1,4.0,s\nn1,r2,0,3.0,s\n")
    assert main(["import", "iterations", str(csv), "--campaign", str(tmp_path / "c"), "--name", "app"]) == 0
    got = stored(tmp_path / "c", "SELECT trial, value, higher_is_better FROM runs ORDER BY trial")
    assert got == [(0, 3.0, False), (1, 3.0, False)]


HPL = "node,run,iteration,value\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (HPL + "n1,a,0,1.5\nn1,a,1,abc\n", r"hpl.csv:3: value 'abc' is not a number"),
        (HPL + "n1,a,0,1.5\nn1,a,1\n", r"hpl.csv:3: 3 fields, expected 4"),
        ("node,run,value\nn1,a,1.5\n", r"hpl.csv:1: header lacks column\(s\) iteration"),
        (HPL + "n1,a,x,1.5\n", r"hpl.csv:2: iteration 'x' is not an integer"),
        (HPL + "n1,a,0,1\nn1,a,0,2\n", r"hpl.csv:3: duplicate iteration 0"),
        (HPL + "n1,a,0,inf\n", r"hpl.csv:2: value 'inf' is not a finite number"),
        ("node,run,iteration,value,colour\nn1,a,0,1,red\n", r"hpl.csv:1: unknown column\(s\) 'colour'"),
        ("", r"hpl.csv:1: empty file"),
        (HPL, r"hpl.csv: no data lines"),
        (
            "node,run,iteration,value,higher_is_better\nn1,a,0,1,maybe\n",
            r"hpl.csv:2: higher_is_better 'maybe'",
        ),
        (
            "node,run,iteration,value,unit\nn1,a,0,1,widgets\n",
            r"cannot tell whether higher values are better",
        ),
        (HPL + "n1,a,0,-3\n", r"rates must be positive"),
    ],
)
def test_bad_csv_is_one_line_exit_2_and_stores_nothing(tmp_path, capsys, text, expected):
    import re

    campaign = tmp_path / "c"
    good = write(tmp_path, "node,run,iteration,value,unit\nn9,a,0,5,GB/s\n", name="good.csv")
    assert main(["import", "iterations", str(good), "--campaign", str(campaign)]) == 0
    before = sorted(p.name for p in (campaign / "shards" / "runs").iterdir())
    capsys.readouterr()
    bad = write(tmp_path, text)
    direction = [] if "unit" in text or "higher_is_better" in text else ["--higher-is-better"]
    assert main(["import", "iterations", str(bad), "--campaign", str(campaign), *direction]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tailscope: error: ") and "\n" not in err
    assert re.search(expected, err), err
    assert sorted(p.name for p in (campaign / "shards" / "runs").iterdir()) == before
    assert stored(campaign, "SELECT node, value FROM runs") == [("n9", 5.0)]


def test_reimport_is_refused(tmp_path, capsys):
    csv = write(tmp_path, "node,run,iteration,value\nn1,a,0,1\n")
    args = ["import", "iterations", str(csv), "--campaign", str(tmp_path / "c"), "--higher-is-better"]
    assert main(args) == 0
    assert main(args) == 2
    assert "already holds 1 runs of imported:hpl" in capsys.readouterr().err
