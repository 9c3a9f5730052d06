"""The seed's derived metrics on a replayed seed-format file, against values worked out by hand "
"(seed_file.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import seed_file

from tailscope.cli import main
from tailscope.counters.metrics import corrected_delta, series_width, uncore_location


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    path = tmp_path / "n1.perfcounts.lua"
    path.write_text(seed_file.text())
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "c")]) == 0
    return tmp_path / "c"


def metrics(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    capsys.readouterr()
    assert main(["metrics", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seed_formulas_by_hand(campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = metrics(capsys, str(campaign), "--node", "n1")
    assert (m["from_sample"], m["to_sample"]) == (0, 2)
    assert m["tsc_ghz"] == pytest.approx(2.1)  # TSC_ratio 21 x 0.1
    assert m["seconds"] == pytest.approx(2.0)  # 4.2e9 TSC cycles at 2.1 GHz
    cpu0 = m["cpus"]["0"]
    assert cpu0["instructions"] == 8e9  # across the 48-bit wrap
    assert cpu0["ghz"] == pytest.approx(4e9 / 3.15e9 * 2.1)
    assert cpu0["ipc"] == pytest.approx(2.0)
    assert cpu0["fraction_halted"] == pytest.approx(0.25)
    s0 = m["sockets"]["0"]
    assert s0["dram_read_bytes"] == 3e6 * 64 and s0["dram_write_bytes"] == 1e6 * 64
    assert s0["dram_read_gbs"] == pytest.approx(0.096) and s0["dram_write_gbs"] == pytest.approx(0.032)
    assert s0["page_conflict"] == pytest.approx(0.1)
    assert s0["page_miss"] == pytest.approx(0.2)
    assert s0["page_hit"] == pytest.approx(0.7)
    assert m["sockets"]["1"]["dram_read_bytes"] == 2e6 * 64
    assert m["units"]["cha"]["0"]["1"]["SF_EVICTION.M_STATE"] == 20.0
    assert m["socket_totals"]["0"]["cha"]["SF_EVICTION.M_STATE"] == 20.0 + 1.0  # CHA 0: 1 -> 1 -> 2
    assert m["other"]["power/rapl_pkg_energy/0"] == 2296.0  # 32-bit wrap: 1000 - 4294967000 + 2^32, + 1000
    assert "package/pkg_therm_status/0" not in m["other"]  # a gauge has no delta


def test_interval_by_sample_and_by_time(campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = metrics(capsys, str(campaign), "--from-sample", "1", "--to-sample", "2")
    assert one["seconds"] == pytest.approx(1.0)
    assert one["sockets"]["0"]["dram_read_bytes"] == 1.5e6 * 64
    by_time = metrics(capsys, str(campaign), "--from", "1532379482.08", "--to", "2018-07-23T20:58:03.1Z")
    assert (by_time["from_sample"], by_time["to_sample"]) == (1, 2)


def test_bad_interval_exits_2(campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", str(campaign), "--from-sample", "2", "--to-sample", "7"]) == 2
    assert "not within node n1's samples 0..2" in capsys.readouterr().err
    assert main(["metrics", str(campaign), "--node", "other"]) == 2
    assert main(["metrics", str(campaign), "--from", "yesterday"]) == 2


def test_wraparound_and_locations() -> None:
    assert corrected_delta(np.array([5.0]), np.array([2.0**48 - 5]), 48).tolist() == [10.0]
    assert corrected_delta(np.array([5.0]), np.array([2.0**32 - 5]), 32).tolist() == [10.0]
    assert series_width("imported:perfcounts", "uncore_cha:1", "X") == 48
    assert series_width("imported:perfcounts", "power", "rapl_dram_energy") == 32
    assert series_width("imported:perfcounts", "package", "pkg_temperature") is None
    assert series_width("monitor", "power", "energy-pkg") == 64
    assert uncore_location("uncore_imc:1", 3) == ("uncore_imc", 1, 3)
    assert uncore_location("uncore_imc_3", 1) == ("uncore_imc", 1, 3)
    assert uncore_location("cpu", 3) is None
