"""Fuzzing a user's application run through the command line, in-process (`main()`), as its sibling
test_fuzz_cli.py fuzzes the importers and the campaign spec (issue 30):

- `run [OPTIONS] -- CMD`: the options of a working command line, values swapped for hostile ones (patterns RE2
  refuses or Python's re backtracks on, numbers out of bounds, paths out of the trial's directory, headlines
  <= 0), options dropped and repeated; each runs one trial of a small program;
- application definitions, mutated as text and read by `campaign submit --dry-run` of a spec whose [[apps]]
  names the file (what `check --app FILE` reads).

Whatever the input: no traceback; the exit is one of the README's codes (0, 1, 2, 3, 130); a refusal is one
line on stderr, and a refused command stores nothing. Seeded; TAILSCOPE_FUZZ scales the counts.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import pytest
from test_fuzz_cli import check_outcome, mutate, restore, run_main, snapshot, work  # noqa: F401

RUNS = max(1, int(__import__("os").environ.get("TAILSCOPE_FUZZ", "300")) // 12)  # 25 runs in CI
DEFINITIONS = int(__import__("os").environ.get("TAILSCOPE_FUZZ", "300")) // 2  # 150 in CI

PROGRAM = "print('value 5.0 rate 3')\nprint('E -6.7')\nprint('it 1')\nprint('it x')\nprint('x' * 70000)\n"
OPTIONS: list[tuple[str, str | None]] = [
    ("--metric", r"v:ops/s:higher=value (\S+)"),
    ("--metric", r"r=rate (\d+)"),
    ("--sanity", "value"),
    ("--iteration-regex", r"it (\S+)"),
    ("--timeout", "30"),
    ("--warmup", "0"),
    ("--reference", "5:-10,+10"),
    ("--name", "fz"),
    ("--env", "X=1"),
    ("--no-evidence", None),
]
VALUES = [
    r"(a)\1", r"(?=value)(\S+)", r"(?<=value )(\S+)", r"v=(?P<n>\S+)(?P=n)", r"v=(\S+)\Z", r"v=^(a+)+$",
    r"v=.*value ([0-9.]+)", r"v=(x+x+)+y(\d)", r"v=(.{0,100}){10}z(\d)", "v=a{1000}{1000}(b)", "v=(", "v=",
    "=x", r"E=E (\S+)", r"v:s:sideways=(\d+)", r"bad name=(\d+)", r"v=value (\S+)", r"v=\p{Greek}(\d)",
    "inf", "nan", "-1", "0", "1e999", "604801", "1000001", "1000000000000000000", "", "\x1b[2J", "\u202e",
    "md.log", "../md.log", "/etc/shadow", "/dev/zero", "5:-10", "0:-5,+5", "X", "1X=2", "A=\n",
]  # fmt: skip
EXTRA = [("--metric-file", "md.log"), ("--metric-file", "../x"), ("--trials", "0"), ("--format", "lammps"),
         ("--page", "2m"), ("--events", "no-such-set")]  # fmt: skip


def mutate_options(rng: random.Random) -> list[str]:
    chosen = [o for o in OPTIONS if rng.random() < 0.7]
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["value", "value", "drop", "dup", "extra"])
        if kind == "value" and chosen:
            i = rng.randrange(len(chosen))
            if chosen[i][1] is not None:
                chosen[i] = (chosen[i][0], rng.choice(VALUES))
        elif kind == "drop" and chosen:
            del chosen[rng.randrange(len(chosen))]
        elif kind == "dup" and chosen:
            chosen.append(rng.choice(chosen))
        elif kind == "extra":
            chosen.append(rng.choice(EXTRA))
    return [w for flag, value in chosen for w in ((flag,) if value is None else (flag, value))]


def test_run_command_line_fuzz_through_main(work: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    program = work / "app.py"
    program.write_text(PROGRAM)
    rng = random.Random("run-fuzz")
    outcomes: dict[int, int] = {}
    for k in range(RUNS):
        campaign = work / f"c{k}"
        options = mutate_options(rng)
        argv = ["run", "--no-progress", "--trials", "1", "--campaign", str(campaign), *options]
        argv += ["--", sys.executable, str(program)]
        code, err = run_main(argv, capsys)
        assert code in (0, 1, 2, 3, 130), (code, err, options)
        assert "Traceback" not in err, err
        if code == 2:  # one line (the run parser's own, or tailscope's), nothing stored
            heads = ("tailscope: error:", "tailscope run: error:")
            lines = [x for x in err.splitlines() if x.startswith(heads)]
            assert len(lines) == 1, (err, options)
            assert not campaign.exists(), options
        shutil.rmtree(campaign, ignore_errors=True)
        outcomes[code] = outcomes.get(code, 0) + 1
    assert outcomes.get(2, 0) >= RUNS // 4 and outcomes.get(0, 0) + outcomes.get(1, 0) >= 1, outcomes


APP = """\
name = "widgets"
argv = ["/bin/echo", "value 5"]
trials = 3
timeout = 60
warmup = 0
metrics = ["v:widgets=value (\\\\d+)"]
sanity = "value"
iteration_regex = '^(\\\\d+)'
reference = "5:-10,+10"
metric_file = "md.log"
env = { OMP_NUM_THREADS = "1" }
"""
SPEC = (
    '[campaign]\ndirectory = "campaigns/fleet"\n\n[slurm]\nnodes = "n[1-2]"\n\n[[apps]]\nfile = "app.toml"\n'
)


def test_definition_fuzz_through_main(work: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    spec = work / "spec.toml"
    spec.write_text(SPEC)
    definition = work / "app.toml"
    definition.write_text(APP)
    argv = ["campaign", "submit", "--dry-run", str(spec)]
    code, err = run_main(argv, capsys)
    assert code == 0, err
    before = snapshot(work)
    rng = random.Random("definition-fuzz")
    outcomes = {0: 0, 2: 0, 130: 0}
    hostile = [f'"{v}"' for v in VALUES if '"' not in v and "\\" not in v] + ["inf", "nan", "[[[[[[1]]]]]]"]
    for _ in range(DEFINITIONS):
        text = APP
        if rng.random() < 0.5:  # a hostile value for one key, then the usual text mutations
            lines = text.splitlines()
            i = rng.randrange(1, len(lines))
            lines[i] = lines[i].split("=")[0] + "= " + rng.choice(hostile)
            text = "\n".join(lines) + "\n"
        definition.write_bytes(mutate(text, rng))
        code, err = run_main(argv, capsys)
        check_outcome(code, err, before | {"app.toml": definition.read_bytes()}, work, argv)
        outcomes[code] += 1
        if code == 0:
            restore(work, before | {"app.toml": definition.read_bytes()})
    assert outcomes[2] >= DEFINITIONS // 4, outcomes
