"""`analyze --json` carries every figure a run reports (analysis/figures.py), not only its headline: per
cache level, per operation and precision, per message size, per kernel, and the `summary.figures` of
imported and application runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tailscope.analysis.figures import figures_of

SUMMARIES = json.loads((Path(__file__).parent / "fixtures" / "probe_summaries.json").read_text())


def _one(figs: list[dict], name: str, **params) -> float:
    (f,) = [f for f in figs if f["name"] == name and f.get("params", {}) == params]
    return f["value"]


def test_latency_per_level():
    s = SUMMARIES["latency"]
    figs = figures_of("latency", s)
    assert len(figs) == 2 * len(s["working_sets"]) == 6
    w = s["working_sets"][2]
    assert _one(figs, "latency_ns", level="ws_8388608", bytes=8388608) == w["ns"]["median"]
    assert _one(figs, "latency_cycles", level="ws_8388608", bytes=8388608) == w["cycles"]["median"]
    assert all(f["unit"] in ("ns", "cycles") and f["higher_is_better"] is False for f in figs)


def test_arith_per_operation_and_precision():
    s = SUMMARIES["arith"]
    figs = figures_of("arith", json.dumps(s))  # stored summaries are JSON text
    rows = s["table"]
    assert len([f for f in figs if f["name"] in ("latency_cycles", "rthroughput_cycles")]) == 2 * len(rows)
    r = next(r for r in rows if (r["precision"], r["width"], r["op"]) == ("fp64", "scalar", "fma"))
    key = {"precision": "fp64", "width": "scalar", "op": "fma"}
    assert _one(figs, "latency_cycles", **key) == r["latency_cycles"]["median"]
    assert _one(figs, "rthroughput_cycles", **key) == r["rthroughput_cycles"]["median"]
    assert _one(figs, "effective_hz", cpu=0) == s["clock"][0]["effective_hz"]
    # a pair arith refused has no figures (never a throughput above latency)
    row = {"precision": "fp16", "width": "avx512fp16", "op": "sqrt", "latency_cycles": None,
           "rthroughput_cycles": None, "refused": "throughput_above_latency"}  # fmt: skip
    refused = dict(s, table=[row])
    assert [f for f in figures_of("arith", refused) if f["name"] != "effective_hz"] == []


def test_mpi_p2p_per_message_size_and_stream_per_kernel():
    figs = figures_of("mpi-p2p", SUMMARIES["mpi-p2p"])
    sizes = [r["bytes"] for r in SUMMARIES["mpi-p2p"]["sizes"]]
    assert sizes == [1, 4096, 1048576]
    assert [f["params"]["bytes"] for f in figs if f["name"] == "latency_us"] == sizes  # each size
    want = SUMMARIES["mpi-p2p"]["sizes"][1]["bandwidth_gbs"]["median"]
    assert _one(figs, "bandwidth_gbs", bytes=4096) == want
    figs = figures_of("stream", SUMMARIES["stream"])
    assert {f["params"]["kernel"] for f in figs} == {"copy", "scale", "add", "triad"}
    assert _one(figs, "gbs", kernel="triad") == SUMMARIES["stream"]["kernels"]["triad"]["gbs"]
    figs = figures_of("c2c", SUMMARIES["c2c"])
    assert _one(figs, "one_way_ns", a=0, b=1, shared="llc") == SUMMARIES["c2c"]["pairs"][0]["ns"]["median"]


def test_imported_and_application_runs_keep_their_stored_figures():
    """READER.md: figures beyond the headline are stored in summary.figures, as OSU's size table is."""
    summary = {"figures": [
        {"name": "latency", "value": 0.21, "unit": "us", "higher_is_better": False, "params": {"size": 0}},
        {"name": "latency", "value": 1.93, "unit": "us", "higher_is_better": False, "params": {"size": 4096}},
        {"name": "broken", "value": float("nan"), "unit": "us", "higher_is_better": False},
        {"value": 3.0},
    ]}  # fmt: skip
    figs = figures_of("imported:osu", summary)
    assert figs == [
        {"name": "latency", "value": 0.21, "unit": "us", "higher_is_better": False, "params": {"size": 0}},
        {"name": "latency", "value": 1.93, "unit": "us", "higher_is_better": False, "params": {"size": 4096}},
    ]
    assert figures_of("latency", None) == [] and figures_of("latency", "not json") == []


@pytest.mark.slow
def _fma_precisions(options: list[str]) -> set[str]:
    """The precisions arith measures FMA in on this CPU, as the probe itself says (`--check-args`:
    params.kernels): FP32 and FP64 everywhere, FP16 too where the CPU has AVX512-FP16 or FEAT_FP16."""
    import subprocess

    from tailscope.native import native_path

    argv = [str(native_path("arith")), *options, "--check-args"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout
    kernels = json.loads(out.splitlines()[0])["params"]["kernels"]
    return {k.split("_")[0] for k in kernels if "_fma_" in k}


def test_analyze_json_has_every_figure_of_every_run(tmp_path, capsys):
    from tailscope.cli import main

    root = tmp_path / "c"
    quick = ["--trials", "2", "--campaign", str(root), "--no-progress"]
    arith = ["arith", "--ops", "4096", "--iterations", "5", "--clock-chunks", "5"]  # not refused when busy
    latency = ["latency", "--sizes", "16k,256k", "--iterations", "3", "--clock-chunks", "3"]
    assert main(["run", *arith, *quick]) == 0
    assert main(["run", *latency, *quick]) == 0
    capsys.readouterr()
    assert main(["analyze", str(root), "--json"]) in (0, 1, 3)  # the verdict of 2 trials is no matter here
    doc = json.loads(capsys.readouterr().out)
    runs = doc["runs"]
    assert {r["probe"] for r in runs} == {"arith", "latency"}
    levels = set()
    for run in runs:
        names = {f["name"] for f in run["figures"]}
        if run["probe"] == "latency":  # `--sizes 16k,256k` is two variants of one level each
            (level,) = [f["params"]["level"] for f in run["figures"] if f["name"] == "latency_ns"]
            levels.add(level)
            assert names == {"latency_ns", "latency_cycles"}
        else:
            assert {"latency_cycles", "rthroughput_cycles", "effective_hz"} <= names
            fma = [f for f in run["figures"] if f.get("params", {}).get("op") == "fma"]
            assert {f["params"]["precision"] for f in fma} == _fma_precisions(arith[1:])
        for f in run["figures"]:
            assert set(f) <= {"name", "value", "unit", "higher_is_better", "params"}
            assert isinstance(f["value"], float) and isinstance(f["higher_is_better"], bool)
    assert levels == {"ws_16384", "ws_262144"}
