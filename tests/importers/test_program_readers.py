"""The program readers on real outputs (fixtures/programs/README.md says where each comes from):
every figure equals what the program printed on the line the reader names, `import FORMAT FILE` stores one
trial per result through the one runs-row builder, and cut or malformed outputs are one line, exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.importers import ImportInputError
from tailscope.importers.reader import detect_format, program_reader, read_program
from tailscope.store.views import connect

PROGRAMS = Path(__file__).parent / "fixtures" / "programs"

# fixture -> (format, runs, headline (name, value, unit, higher), params of the first run)
CASES = {
    "lammps-melt-1proc.log": ("lammps", 1, ("loop_time", 3.37067, "s", False),
                              {"procs": 1, "steps": 250, "atoms": 4000}),
    "lammps-melt-cpu-two-runs.log": ("lammps", 2, ("loop_time", 3.5919, "s", False),
                                     {"procs": 1, "steps": 250, "atoms": 4000}),
    "gromacs-water-md.log": ("gromacs", 1, ("ns_per_day", 9.404, "ns/day", True),
                             {"steps": 1500, "ranks": 1}),
    "gromacs-water-stderr.txt": ("gromacs", 1, ("ns_per_day", 9.404, "ns/day", True), {"steps": 1500}),
    "stream-5.10-epyc9654-nps1.txt": ("stream", 1, ("triad", 718799.1, "MB/s", True),
                                      {"array_size": 430080000, "threads": 96}),
    "npb-3.3.1-omp-ft.S.txt": ("npb", 1, ("mops_total", 55.63, "Mop/s", True),
                               {"benchmark": "ft", "class": "S", "size": "64x64x64", "threads": 1}),
    "osu-5.8-latency.txt": ("osu", 24, ("latency", 1.61, "us", False), {"test": "latency", "size": 0}),
    "osu-5.8-bw.txt": ("osu", 23, ("bandwidth", 3.88, "MB/s", True), {"test": "bandwidth", "size": 1}),
    "osu-5.8-allreduce.txt": ("osu", 19, ("avg_latency", 10.08, "us", False),
                              {"test": "allreduce_latency", "size": 4}),
}  # fmt: skip


def _printed(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"[-+]?\d+\.?\d*(?:[eE][-+]?\d+)?", line)]


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_figures_are_what_the_program_printed(fixture):
    fmt, count, headline, params = CASES[fixture]
    lines = (PROGRAMS / fixture).read_text().splitlines()
    assert detect_format(lines) == fmt
    runs = read_program(fmt, lines, fixture)
    assert len(runs) == count
    first = runs[0].figures[0]
    assert (first.name, first.value, first.unit, first.higher_is_better) == headline
    assert dict(runs[0].params) == params
    for run in runs:
        for figure in run.figures:  # every figure is a number printed on the line it names
            assert figure.value in _printed(lines[figure.line - 1]), (figure, lines[figure.line - 1])


def test_lammps_thermo_cpu_column_gives_iterations():
    lines = (PROGRAMS / "lammps-melt-cpu-two-runs.log").read_text().splitlines()
    first, second = read_program("lammps", lines, "log")
    assert len(first.iterations) == 5 and len(second.iterations) == 5  # thermo every 50 of 250 steps
    # the intervals add up to the last CPU value LAMMPS printed, within the Loop time
    assert sum(first.iterations) == pytest.approx(3.582787)
    assert sum(first.iterations) <= first.figures[0].value
    assert [f.name for f in first.figures] == ["loop_time", "tau_per_day", "timesteps_per_s"]
    plain = read_program("lammps", (PROGRAMS / "lammps-melt-1proc.log").read_text().splitlines(), "log")
    assert plain[0].iterations == ()  # no CPU column: no invented iterations


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_import_stores_one_trial_per_result(tmp_path, capsys, fixture):
    fmt, count, headline, params = CASES[fixture]
    campaign = tmp_path / "c"
    assert main(["import", fmt, str(PROGRAMS / fixture), "--campaign", str(campaign), "--node", "n1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"imported {count} {fmt} runs (")
    con = connect(campaign)
    rows = con.execute(
        "SELECT probe, variant, params, metric, value, unit, higher_is_better, status, source, summary "
        "FROM runs ORDER BY summary"
    ).fetchall()
    con.close()
    assert len(rows) == count
    runs = read_program(fmt, (PROGRAMS / fixture).read_text().splitlines(), fixture)
    first = next(r for r in rows if json.loads(r[9])["line"] == runs[0].first_line)
    assert first[0] == f"imported:{fmt}"
    assert json.loads(first[2]) == params
    assert first[3:9] == (*headline, "ok", f"import:{fmt}")
    extra = json.loads(first[9]).get("figures", [])
    assert [f["name"] for f in extra] == [f.name for f in runs[0].figures[1:]]
    # the same file again is refused, nothing stored twice
    assert main(["import", fmt, str(PROGRAMS / fixture), "--campaign", str(campaign), "--node", "n1"]) == 2
    assert "already imported" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("lammps", "LAMMPS (7 Jan 2022)\nStep Temp\n", r"^f:  ?no LAMMPS 'Loop time of"),
        ("gromacs", "Performance:        9.404        2.552\n", r"^f:1: GROMACS 'Performance:' line without"),
        ("stream", "Function    Best Rate MB/s  Avg time\nCopy: 1.0 0.1 0.1 0.1\n",
         r"^f:2: STREAM table without"),
        ("npb", " FT Benchmark Completed.\n Class = S\n\n",
         r"^f:1: NPB FT result block without its 'Mop/s total'"),
        ("osu", "# OSU MPI Latency Test v5.8\n# Size          Latency (us)\n8   1e999\n",
         r"^f:3: latency '1e999' is not a finite number"),
        ("osu", "# OSU MPI Latency Test v5.8\n# Size          Latency (us)\n" + "9" * 30 + "   1.0\n",
         r"^f:3: size 9{20}\.\.\. is out of range"),
        ("lammps", "Loop time of 1.0 on 99999999999 procs for 10 steps with 5 atoms\n",
         r"^f:1: procs 99999999999 is out of range \(expected 1\.\.2147483647\)"),
    ],
)  # fmt: skip
def test_bad_outputs_are_one_line(fmt, text, message):
    reader = program_reader(fmt)
    for number, line in enumerate(text.splitlines(), start=1):
        reader.feed(number, line)
    with pytest.raises(ImportInputError, match=message):
        reader.finish("f")


def test_a_truncated_program_output_is_refused_by_import(tmp_path, capsys):
    """A LAMMPS log cut before its Loop time line (a killed run) stores nothing."""
    text = (PROGRAMS / "lammps-melt-1proc.log").read_text()
    cut = tmp_path / "log.lammps"
    cut.write_text(text[: text.index("Loop time")])
    assert main(["import", "lammps", str(cut), "--campaign", str(tmp_path / "c"), "--node", "n1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    expected = f"{cut}: no LAMMPS 'Loop time of T on N procs for S steps with A atoms' line"
    assert err == [f"tailscope: error: {expected}"]
    assert not (tmp_path / "c").exists()


def test_a_live_lammps_run_reads_as_printed(tmp_path):
    """Debian's lmp on the melt example (100 steps): the reader's figures are the printed ones."""
    import shutil
    import subprocess

    melt = Path("/usr/share/lammps/examples/melt/in.melt")
    if shutil.which("lmp") is None or not melt.is_file():
        pytest.skip("needs Debian's lammps and lammps-examples")
    (tmp_path / "in.melt").write_text(melt.read_text().replace("run\t\t250", "run\t\t100"))
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["lmp", "-in", "in.melt", "-log", "none"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert detect_format(lines) == "lammps"
    (run,) = read_program("lammps", lines, "stdout")
    (loop,) = [line for line in lines if line.startswith("Loop time of ")]
    assert f"Loop time of {run.figures[0].value:g} on 1 procs for 100 steps with 4000 atoms" == loop
    perf = next(line for line in lines if line.startswith("Performance:"))
    assert [f.value for f in run.figures[1:]] == _printed(perf)
