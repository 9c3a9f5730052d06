"""A fleet whose node facts were recorded from real-format dmidecode output (tests/node/fixtures/dmidecode):
one node with a 1-rank DIMM among 2-rank peers, one with a lower configured memory speed, one with other
microcode. `analyze --json`, the node verdicts and the report name each node with the fields that differ, as
the `hardware-config` cause, whose comparison is node/fleet.py's `fleet_findings` (untested on hardware:
this VM has no SMBIOS memory table).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tailscope import cli
from tailscope.node.dimms import parse_dmidecode
from tailscope.node.facts import nodes_row
from tailscope.store.campaign import Campaign
from tailscope.store.load import load_into
from tailscope.store.schema import TABLES

from .fleet import fleet_frame, write_frame

DMI = Path(__file__).resolve().parents[1] / "node" / "fixtures" / "dmidecode"
NODES = [f"c{i:04d}" for i in range(8)]
ONE_RANK, SLOW_DIMMS, OTHER_MICROCODE, SLOW_AND_FINE = "c0005", "c0006", "c0007", "c0003"


def _facts(node: str) -> dict:
    dmi = {ONE_RANK: "node-one-1rank.txt", SLOW_DIMMS: "node-2666.txt"}.get(node, "node-2rank-2933.txt")
    return {
        "node": node,
        "cpu_model_name": "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz",
        "microcode": "0x5003302" if node == OTHER_MICROCODE else "0x5003006",
        "governor": "performance",
        "dimms": [asdict(d) for d in parse_dmidecode((DMI / dmi).read_text())],
        "dimms_source": "dmidecode -t 17",
    }


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    factor = np.ones(len(NODES))
    factor[[5, 6]] = 0.88  # the mixed-rank and the slow-DIMM nodes lose memory bandwidth (SJTU)
    factor[3] = 0.88  # slow as well, configured like the majority: no hardware-config for it
    root = tmp_path_factory.mktemp("fleetcfg") / "fleet"
    campaign = Campaign.create(root, name="fleet-config")
    write_frame(campaign, fleet_frame(factor, 12, 0.01, rng))
    at = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    rows = [nodes_row(_facts(n), collected_at=at, task=f"task-{n}") for n in NODES]
    with load_into(root, "test") as load:
        load.write_tables({"nodes": pa.Table.from_pylist(rows, schema=TABLES["nodes"].schema)}, node="facts")
    return root


def _analyze_json(root: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    assert cli.main(["analyze", str(root), "--json"]) in (0, 1)
    return json.loads(raw.getvalue())


def test_analyze_json_names_the_nodes_and_fields(campaign_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _analyze_json(campaign_dir, monkeypatch)
    hw = {n["node"]: c for n in doc["nodes"] for c in n["causes"] if c["cause"] == "hardware-config"}
    assert set(hw) == {ONE_RANK, SLOW_DIMMS, OTHER_MICROCODE}
    assert hw[ONE_RANK]["evidence"]["differs"] == {
        "ranks": {"node": [1, 2], "peers": None},  # 1-rank and 2-rank modules on one node
        "total_bytes": {"node": 112 << 30, "peers": 128 << 30},  # the 1-rank module is 16 GB, not 32
    }
    assert hw[SLOW_DIMMS]["evidence"]["differs"] == {
        "min_configured_speed_mts": {"node": 2666, "peers": 2933}
    }
    assert hw[OTHER_MICROCODE]["evidence"]["differs"] == {
        "microcode": {"node": "0x5003302", "peers": "0x5003006"}
    }
    verdicts = {n["node"]: n for n in doc["nodes"]}
    for node in (ONE_RANK, SLOW_DIMMS):  # slower and configured unlike the fleet: drained, cause named
        assert verdicts[node]["verdict"] == "degraded" and verdicts[node]["drain"]
        assert (
            hw[node]["score"] == 0.8
            and "slower than its peers and differs from them in" in hw[node]["sentence"]
        )
    assert "min_configured_speed_mts 2666 (peers: 2933)" in hw[SLOW_DIMMS]["sentence"]
    assert "ranks 1/2 (mixed on this node)" in hw[ONE_RANK]["sentence"]
    assert "total_bytes 112 GiB (peers: 128 GiB)" in hw[ONE_RANK]["sentence"]
    # other microcode, not slower: named, verdict unchanged
    assert verdicts[OTHER_MICROCODE]["verdict"] == "healthy" and hw[OTHER_MICROCODE]["score"] == 0.3
    assert any("microcode 0x5003302 (peers: 0x5003006)" in r for r in verdicts[OTHER_MICROCODE]["reasons"])
    # slow but configured like the majority: drained without a hardware-config cause
    assert verdicts[SLOW_AND_FINE]["drain"] and SLOW_AND_FINE not in hw


def test_report_names_them(campaign_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert cli.main(["report", str(campaign_dir), "-o", str(out)]) == 0
    html = out.read_text()
    section = html[html.index('id="hwconfig"') :]
    section = section[: section.index("</table>")]
    for node, field in (
        (ONE_RANK, "ranks"),
        (ONE_RANK, "total_bytes"),
        (SLOW_DIMMS, "min_configured_speed_mts"),
        (OTHER_MICROCODE, "microcode"),
    ):
        assert f"<td>{node}</td><td>{field}</td>" in section
    assert SLOW_AND_FINE not in section
    assert "<td>c0005</td><td>total_bytes</td><td>112 GiB</td><td>128 GiB</td>" in section
