"""`analyze --json` and `report` through the CLI: the library's result, written at once, one store read.

With PYTHONUNBUFFERED=1 (many job environments) stdout has no buffer: `json.dump(..., indent=1)` made one
write() per token (4 million for a 1,000-node campaign). The JSON is now encoded first and written once.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tailscope import cli
from tailscope.analysis.model import Settings
from tailscope.store.campaign import Campaign
from tailscope.verbs.workflow import analyze_campaign

from .fleet import fleet_frame, write_frame


class CountingRaw(io.RawIOBase):
    """An unbuffered binary stdout that counts write() calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        self.calls += 1
        self.data += b
        return len(b)


def unbuffered_stdout() -> tuple[io.TextIOWrapper, CountingRaw]:
    raw = CountingRaw()
    return io.TextIOWrapper(raw, encoding="utf-8", write_through=True), raw  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(7)
    factor = np.exp(rng.normal(0.0, 0.02, 12))
    factor[3] *= 0.85  # a slow node: drain and re-test lists are not empty
    frame = fleet_frame(factor, 12, 0.01, rng)
    frame.loc[frame.index[5], "value"] *= 0.8  # a slow run
    root = tmp_path_factory.mktemp("json") / "fleet"
    write_frame(Campaign.create(root, name="json-fleet"), frame)
    return root


def test_analyze_json_is_the_library_result_in_one_write(
    campaign_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout, raw = unbuffered_stdout()
    monkeypatch.setattr(sys, "stdout", stdout)
    code = cli.main(["analyze", str(campaign_dir), "--json"])
    assert code in (0, 1)
    got = json.loads(raw.data)
    want = json.loads(json.dumps(analyze_campaign(campaign_dir, Settings()).to_json(), default=str))
    assert got == want
    assert len(got["runs"]) == 144 and got["cluster"]
    assert raw.calls <= 2, f"{raw.calls} write() calls for {len(raw.data)} bytes"

    # The control: the old way, token by token, into the same unbuffered stream.
    stdout, control = unbuffered_stdout()
    json.dump(want, stdout, indent=1)
    assert control.calls > 1000


def test_report_reads_the_store_once(
    campaign_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `report` analyses and renders on one store connection: each connect reads every shard again.
    from tailscope.verbs import workflow

    opened = []

    def counting_connect(*args: object, **kwargs: object) -> object:
        opened.append(args)
        return real_connect(*args, **kwargs)  # type: ignore[arg-type]

    real_connect = workflow.connect
    monkeypatch.setattr(workflow, "connect", counting_connect)
    out = tmp_path / "r.html"
    assert cli.main(["report", str(campaign_dir), "-o", str(out)]) == 0
    html = out.read_text()
    assert html.lstrip().lower().startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert "c0003" in html  # the slow node is in the tables
    assert len(opened) == 1
