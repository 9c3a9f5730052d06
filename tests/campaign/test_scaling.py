"""`tailscope run PROBE --scaling`: one variant per core count, the table recomputed from the store."""

from __future__ import annotations

import json
import os

import pytest

from tailscope.cli import main
from tailscope.store.views import connect
from tailscope.verbs.scaling import scaling_table


def test_stream_one_to_all_cores(tmp_path, capsys):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("scaling needs two CPUs")
    campaign = tmp_path / "c"
    argv = ["run", "stream", "--trials", "2", "--scaling", "--elements", "200000", "--reps", "2"]
    rc = main([*argv, "--campaign", str(campaign), "--no-progress", "--no-pages"])
    out = capsys.readouterr().out
    assert rc == 0, out
    con = connect(campaign)
    runs = con.execute("SELECT params, threads, value FROM runs ORDER BY threads, trial").fetchall()
    con.close()
    counts = sorted({r[1] for r in runs})
    assert counts == list(range(1, len(counts) + 1)) and len(counts) >= 2
    cpus = [json.loads(r[0])["cpus"] for r in runs]
    assert cpus[0] == cpus[1] and "," not in cpus[0] and "-" not in cpus[0]  # one CPU, then more
    rows = scaling_table(campaign, "stream")
    assert [r.threads for r in rows] == counts
    for row in rows:
        values = sorted(r[2] for r in runs if r[1] == row.threads)
        assert row.trials == 2
        assert (row.min, row.max) == (values[0], values[-1])
        assert row.median == pytest.approx(sum(values) / 2)
        line = next(x for x in out.splitlines() if x.split()[1:3] == [str(row.threads), "2"])
        assert f"{row.median:10.3f}" in line
    assert "[GB/s]" in out


def test_scaling_needs_two_cpus(tmp_path, capsys):
    rc = main(
        ["run", "stream", "--trials", "1", "--scaling", "--cpus", "0", "--campaign", str(tmp_path / "c")]
    )
    assert rc == 2
    assert "--scaling: stream resolves to 1 CPU here" in capsys.readouterr().err
