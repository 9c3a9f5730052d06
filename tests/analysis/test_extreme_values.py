"""Values a float holds but whose ratios do not: node medians from 1e-300 to 8e300 import, and every verb
that analyses them answers (analyze, report, verdict, compare) instead of dying in `speed_bins` with an
OverflowError; `validate --param` without '=' is one line and exit 2."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest

from tailscope.analysis.cluster import speed_bins
from tailscope.cli import main

MEDIANS = {"a": 1e-300, "b": 8e300, "c": 3.0, "d": 1.0}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("extreme")
    path = root / "big.csv"
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["node", "run", "iteration", "value", "unit"])
        for node, value in MEDIANS.items():
            for run in range(4):
                for it in range(3):
                    out.writerow([node, run, it, repr(value * (1 + 0.01 * it + 0.001 * run)), "s"])
    assert main(["import", "iterations", str(path), "--campaign", str(root / "c")]) == 0
    return root / "c"


@pytest.mark.parametrize(
    "argv",
    [["analyze", "{c}"], ["analyze", "{c}", "--json"], ["report", "{c}", "-o", "{c}/../r.html"],
     ["verdict", "{c}", "--nhc", "--node", "a"], ["verdict", "{c}", "--drain"], ["compare", "{c}"]],
    ids=["analyze", "json", "report", "nhc", "drain", "compare"],
)  # fmt: skip
def test_every_verb_answers(campaign, capsys, argv):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # an overflow seen by numpy is a wrong number too
        code = main([a.format(c=campaign) for a in argv])
    err = capsys.readouterr().err
    assert code in (0, 1, 2, 3) and "Traceback" not in err
    if argv[0] == "compare":  # one variant: nothing to compare, said in one line
        assert code == 2 and err.count("\n") == 1
    else:
        assert code != 2, err


def test_speed_bins_of_medians_beyond_a_floats_ratio():
    logs = np.log(np.array(list(MEDIANS.values())))
    labels, chosen, k = speed_bins(logs, 0, 0.02)
    assert chosen and k == 4 and sorted(labels.tolist()) == [1, 2, 3, 4]
    assert labels.tolist() == [1, 4, 3, 2]  # 1 = slowest: the medians in order


@pytest.mark.parametrize("param", ["bogus", "=3", ""])
def test_validate_param_without_a_key_and_value_is_one_line(capsys, param):
    assert main(["validate", "--param", param]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--param {param!r}: expected K=V" in err
