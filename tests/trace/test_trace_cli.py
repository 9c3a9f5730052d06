"""`tailscope trace` on the command line: refusals (exit 2, one line, no traceback) and a real run of the
jacobi example on a 2-socket topology (this VM's CPU 1 as socket 1), whose remote traffic must come out as
matched OTF2 messages of the stored sizes and as Chrome counter tracks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from chrome_check import check_chrome
from otf2_check import check_archive
from trace_tools import needs_otf2_print

from tailscope.cli import main
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect
from tailscope.trace.run import TraceRequest, load_trace, run_trace
from tailscope.trace.runtime import detect, prepare
from tailscope.trace.timeline import bin_names


def test_refuses_a_program_without_openmp(tmp_path, capsys):
    assert main(["trace", "--campaign", str(tmp_path / "c"), "--", "/bin/true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no OpenMP runtime" in err and "Traceback" not in err


def test_refuses_a_script_and_a_missing_program(tmp_path, capsys):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nexec true\n")
    script.chmod(0o755)
    assert main(["trace", "--", str(script)]) == 2
    assert "not an ELF executable" in capsys.readouterr().err
    assert main(["trace", "--", str(tmp_path / "nope")]) == 2
    assert "no such program" in capsys.readouterr().err
    assert main(["trace"]) == 2
    assert "name the program" in capsys.readouterr().err


def test_refuses_libgomp_when_no_libomp(jacobi, tmp_path, monkeypatch, capsys):
    compiler, binary = jacobi
    if compiler != "gcc":
        pytest.skip("only a gcc-built program needs libomp in place of libgomp")
    monkeypatch.setenv("TAILSCOPE_LIBOMP", str(tmp_path / "missing.so"))
    assert main(["trace", "--campaign", str(tmp_path / "c"), "--", str(binary), "8", "1", "naive"]) == 2
    assert "TAILSCOPE_LIBOMP" in capsys.readouterr().err


def test_runtime_detection_and_link_dir(jacobi, tmp_path):
    compiler, binary = jacobi
    runtime = detect(binary)
    assert runtime is not None
    plan = prepare(binary, tmp_path)
    if compiler == "gcc":
        assert runtime.family == "gnu" and not runtime.has_ompt
        link = tmp_path / "libomp-as-libgomp" / "libgomp.so.1"
        assert link.resolve().name.startswith("libomp")
        assert plan.env["LD_LIBRARY_PATH"].split(":")[0] == str(link.parent)
    else:
        assert runtime.family == "llvm" and plan.env == {}


@needs_otf2_print
def test_two_socket_topology_gives_remote_messages(jacobi, tool_library, pinned, sysfs_2s, tmp_path, capsys):
    _, binary = jacobi
    campaign = tmp_path / "c"
    rc = main(
        [
            "trace",
            "--campaign",
            str(campaign),
            "--sysfs",
            str(sysfs_2s),
            "--",
            str(binary),
            "256",
            "3",
            "naive",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "finding: socket 0 holds 100% of the data" in out and "remote  50.0%" in out
    con = connect(campaign)
    run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
    con.close()
    stored = load_trace(Campaign.open(campaign), run_id)
    traffic = stored["traffic"]
    remote = traffic[traffic["src_socket"] != traffic["dst_socket"]]
    assert set(zip(remote["src_socket"], remote["dst_socket"], strict=True)) == {(0, 1)}
    assert len(remote) == 3  # one per parallel region instance (naive: no initialisation region)
    trace_dir = next((campaign / "traces").iterdir())
    anchor = trace_dir / "otf2" / "traces.otf2"
    subprocess.run(["otf2-print", "--silent", str(anchor)], check=True, capture_output=True)
    summary = check_archive(str(anchor))
    assert sorted(m[4] for m in summary.messages) == sorted(round(b) for b in remote["bytes"])
    assert {(m[0], m[1]) for m in summary.messages} == {("socket 0", "socket 1")}
    assert {m[2] for m in summary.messages} <= {f"bandwidth {n}" for n in bin_names()}
    rates = [m for m in summary.metrics if m[2] > 0]
    assert {(loc, name) for loc, name, _ in rates} == {
        ("socket 1", "bytes/s socket 0 -> 1 (placement-model)")
    }
    assert len(rates) == len(summary.messages)
    doc = check_chrome(trace_dir / "trace.json")
    tracks = {e["name"] for e in doc["traceEvents"] if e["ph"] == "C"}
    assert tracks == {"socket 0 -> 1 bytes/s"}


def test_a_second_openmp_process_writes_beside_not_over(jacobi, tool_library, tmp_path):
    """A program the traced one starts inherits OMP_TOOL_LIBRARIES: it must not overwrite the trace."""
    _, binary = jacobi
    out = tmp_path / "ompt"
    env = {
        "PATH": "/usr/bin:/bin",
        "OMP_NUM_THREADS": "2",
        "OMP_TOOL_LIBRARIES": str(tool_library),
        "TAILSCOPE_OMPT_OUT": str(out),
        "TAILSCOPE_OMPT_NUMA": "off",
    }
    plan = prepare(binary, tmp_path)
    env.update(plan.env)
    proc = subprocess.run(
        ["sh", "-c", f"{binary} 32 2 naive & wait; {binary} 32 5 naive"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert proc.stdout.count("residual=") == 2
    children = list(out.glob("child-*"))
    assert len(children) == 1
    first = dict(line.split("\t", 1) for line in (out / "meta.tsv").read_text().splitlines())
    second = dict(line.split("\t", 1) for line in (children[0] / "meta.tsv").read_text().splitlines())
    assert (first["parallel_regions"], second["parallel_regions"]) == ("2", "5")
    assert (out / "owner").read_text().strip() == first["pid"]


def test_nested_parallel_regions(jacobi, tool_library, tmp_path, monkeypatch):
    """Two levels of parallelism: every region pairs, inner teams live on their own threads, exports check."""
    compiler, _ = jacobi
    cc = "gcc" if compiler == "gcc" else (shutil.which("clang-14") or "clang")
    binary = tmp_path / "nested"
    subprocess.run(
        [cc, "-O1", "-g", "-fopenmp", "-o", str(binary), str(Path(__file__).parent / "nested.c")], check=True
    )
    monkeypatch.setenv("OMP_MAX_ACTIVE_LEVELS", "2")
    outcome = run_trace(TraceRequest(command=[str(binary)], campaign=tmp_path / "c"))
    assert outcome.exit_code == 0 and outcome.unmatched == 0
    r = outcome.regions
    par = r[r["kind"] == "parallel"]
    assert len(par) == 3  # the outer region and one inner region per outer thread
    assert sorted(par["line"].unique()) == [6, 8]
    inner = par[par["line"] == 8]
    assert len(set(inner["thread"])) == 2  # each started by one thread of the outer team
    tasks = r[r["kind"] == "implicit_task"]
    assert len(tasks) == 2 + 2 * 2
    # 2 outer threads + the inner teams' workers: 2, or 1 when libomp reuses one worker for both inner
    # teams because the two inner regions did not overlap in time
    assert r["thread"].nunique() in (3, 4)
    subprocess.run(["otf2-print", "--silent", str(outcome.otf2)], check=True, capture_output=True)
    summary = check_archive(str(outcome.otf2))
    assert sum(v for k, v in summary.enters.items() if k.startswith("thread")) == len(r)
    check_chrome(outcome.chrome)
