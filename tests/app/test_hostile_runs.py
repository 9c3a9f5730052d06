"""Issue 30 as a user's application run meets it: what the program prints, writes or does, and what a
definition says, through the real CLI and store. Each of these failed on the main of that issue:

- a metric regex hung the run past --timeout (1); a headline <= 0 broke every later command (2);
- a --metric-file that is a FIFO blocked (5), a link to /dev/zero read for ever (6), a link to a secret was
  read and its line stored (13);
- a program gone at trial N dropped the finished trials and left an app/ directory that resume refused (7);
- `check --app` took timeout = inf and trials = 10**18 (8), tracebacked on deep TOML (14), read /dev/zero
  (15).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from app_tools import run_words, tailscope_child

from quiet import cpu_share
from store_tools import stored
from tailscope.cli import main

PY = sys.executable
MELT = Path("/usr/share/lammps/examples/melt/in.melt")


def prog(tmp_path: Path, body: str, name: str = "app.py") -> str:
    path = tmp_path / name
    path.write_text("import os, sys, time\ntrial = int(os.environ['TAILSCOPE_TRIAL'])\n" + body)
    return str(path)


def run_child(words: list[str], limit_s: float) -> tuple[int, str, float]:
    """`tailscope WORDS` as a process of its own: (exit code, stderr, seconds from start to its end)."""
    start = time.monotonic()
    proc = tailscope_child(*words, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"tailscope {' '.join(words[:12])} ... still ran after {limit_s} s")
    return proc.returncode, err, time.monotonic() - start


# --- 1: a regex cannot hang the run ---------------------------------------------------------------------
LONG_LINE = "sys.stdout.write('x' * {size} + 'rate 5.0\\n')\n"
A_THEN_B = "sys.stdout.write('a' * {size} + 'b\\n')\n"
RANDOM_AB = (
    "ab = bytes.maketrans(bytes(range(256)), b'ab' * 128)\n"
    "for _ in range({size} // 4096): sys.stdout.buffer.write(os.urandom(4095).translate(ab) + b'\\n')\n"
)


def hostile(tmp_path: Path, size: int) -> list[tuple[str, str, int, str]]:
    """(metric, program, expected exit, expected words): the two regexes of the issue, and one that RE2 itself
    is slow on (its DFA does not fit: ~900 NFA steps a byte) over output it cannot match in time."""
    return [
        ("v=.*rate ([0-9.]+)", prog(tmp_path, LONG_LINE.format(size=size), "long.py"), 0, ""),
        # 2: no line matched (a line over 1 MiB is matched in 1 MiB pieces: one of a's is not a number)
        ("v=^(a+)+$", prog(tmp_path, A_THEN_B.format(size=size), "ab.py"), 2, "metric v: "),
        ("v=a[ab]{900}(c)", prog(tmp_path, RANDOM_AB.format(size=8 << 20), "rnd.py"), 1, ""),
    ]


def check_hostile(tmp_path: Path, size: int) -> None:
    """Each run ends within 10 s of its start on a quiet machine: the trial's 5 s limit (wall time, whatever
    the load) and at most 5 s of work around it (tailscope's start, the bounded matching, the store). The
    machine's load stretches that work: it is allowed 5 s divided by the CPU share that busy loops got just
    before and just after the run (tests/quiet.py: 1.0 quiet, 0.1-0.4 at a load of 12-45 on 2 CPUs here, where
    one control run before all three, the old test's, could not stand for the load during the third). Where
    the load left the matching of a 100 MiB line unfinished at the time limit, the trial fails with that
    reason (exit 1) instead of finding no line (exit 2): either is a clear end."""
    for k, (metric, program, code, words) in enumerate(hostile(tmp_path, size)):
        campaign = tmp_path / f"c{k}"
        options = run_words(campaign, 1, "--timeout", "5", "--no-evidence", "--metric", metric)
        argv = [*options, "--", PY, program]
        before = cpu_share()
        got, err, took = run_child(argv, 600)
        share = (before + cpu_share()) / 2
        allowed = 5.0 + 5.0 / max(share, 0.02)
        assert took < allowed, f"{metric}: {took:.1f} s, --timeout 5 (CPU share {share:.2f}: {allowed:.1f} s)"
        assert "Traceback" not in err, err
        if got == 1 and code == 2:  # not matched in time: the reason below, as for code 1
            code, words = 1, ""
        assert got == code, (metric, got, err)
        assert words in err
        if code == 0:
            assert stored(campaign, "SELECT value FROM runs") == [(5.0,)]
        if code == 1:  # the trial failed with its reason: the patterns were not matched in time
            ((status, error),) = stored(campaign, "SELECT status, error FROM runs")
            assert status == "timeout" and "not matched within the trial time limit" in error, error


def test_hostile_regexes_end_within_10_s_on_a_1_mib_line(tmp_path):
    check_hostile(tmp_path, 1 << 20)


@pytest.mark.slow
def test_hostile_regexes_end_within_10_s_on_a_100_mib_line(tmp_path):
    check_hostile(tmp_path, 100 << 20)


# --- 2: figures of any sign ------------------------------------------------------------------------------
def later_commands(campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """analyze, report, compare, verdict --nhc and --drain on the campaign: a verdict, never a traceback."""
    for words in (
        ["analyze", str(campaign)],
        ["analyze", "--json", str(campaign)],
        ["report", "-o", str(tmp_path / "r.html"), str(campaign)],
        ["compare", str(campaign)],
        ["verdict", "--nhc", str(campaign)],
        ["verdict", "--drain", str(campaign)],
    ):
        capsys.readouterr()
        code = main(words)
        err = capsys.readouterr().err
        assert code in (0, 1, 3) and "Traceback" not in err and "is not > 0" not in err, (words, code, err)


def test_a_headline_below_zero_is_refused_before_anything_is_stored(tmp_path, capsys):
    app = prog(tmp_path, "print('value -6.7')\n")
    campaign = tmp_path / "c"
    assert main([*run_words(campaign, 3, "--metric", r"E=value (\S*)"), "--", PY, app]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "metric E: its value -6.7" in err and "is not > 0" in err, err
    assert not campaign.exists()


def test_figures_of_any_sign_are_stored_and_every_later_command_judges(tmp_path, capsys):
    """The headline a rate, then an energy (negative) and an offset crossing zero as further figures; a
    later trial whose headline is 0 fails with its reason."""
    app = prog(
        tmp_path,
        "print(f'rate {0.0 if trial == 3 else 100 + trial % 2}')\nprint('TotEng -6.7')\n"
        "print(f'offset {trial - 2}')\n",
    )
    campaign = tmp_path / "c"
    words = ["--metric", r"rate=rate (\S+)", "--metric", r"E=TotEng (\S+)", "--metric", r"off=offset (\S+)"]
    variants = ["--env", "X=1", "--env", "X=2"]  # two, for compare
    assert main([*run_words(campaign, 5, "--no-evidence", *variants, *words), "--", PY, app]) == 1
    rows = stored(campaign, "SELECT trial, status, value, error, summary FROM runs WHERE params LIKE '%X=1%' "
                  "ORDER BY trial")  # fmt: skip
    assert [r[1] for r in rows] == ["ok", "ok", "ok", "failed", "ok"]  # trial 3's headline was 0
    assert "metric rate: its value 0" in rows[3][3]
    figures = {f["name"]: f["value"] for f in json.loads(rows[0][4])["figures"]}
    assert figures == {"rate": 100.0, "E": -6.7, "off": -2.0}
    later_commands(campaign, tmp_path, capsys)


def test_a_store_with_an_ok_headline_below_zero_is_judged_not_a_traceback(tmp_path, capsys, monkeypatch):
    """What `run` stored before the fix (trial 1's headline -6.7 as an ok trial): every later command died
    with ValueError; now such runs count as invalid, with their reason, and the others are judged."""
    from tailscope.app import figures, trial

    def old_judge(scan, where, wall_s):  # the judge of before the fix: no look at the headline's sign
        out = figures.judge(scan, where, wall_s)
        if out.error is not None and "is not > 0" in out.error:
            name = scan.spec.metrics[0].name
            return figures.Figures((name, scan.found[name].value, "", True), out.figures, out.iterations)
        return out

    app = prog(tmp_path, "print('rate -6.7' if trial == 1 else f'rate {5 + trial % 2}')\n")
    campaign = tmp_path / "c"
    monkeypatch.setattr(trial, "judge", old_judge)
    words = ["--no-evidence", "--env", "X=1", "--env", "X=2", "--metric", r"E=rate (\S+)"]
    assert main([*run_words(campaign, 4, *words), "--", PY, app]) == 0
    monkeypatch.undo()
    assert stored(campaign, "SELECT DISTINCT status, value FROM runs WHERE trial = 1") == [("ok", -6.7)]
    later_commands(campaign, tmp_path, capsys)
    main(["analyze", "--json", str(campaign)])
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any("invalid: 1; first error: value -6.7 is not > 0: the headline E" in n for n in notes), notes


@pytest.mark.slow
def test_lammps_total_energy_is_a_figure_not_a_headline(tmp_path, capsys):
    """Real LAMMPS (Debian): the LJ melt's TotEng is negative. As a further figure it is stored as printed;
    as the headline it is refused in the first trial, naming it."""
    if shutil.which("lmp") is None or not MELT.exists():
        pytest.skip("lammps and lammps-examples not installed")
    thermo = r"TotEng=^\s+250\s+\S+\s+\S+\s+\S+\s+(\S+)"
    rate = r"steps_per_s:timesteps/s=Performance: .*, ([0-9.]+) timesteps/s"
    campaign = tmp_path / "c"
    words = ["--no-evidence", "--env", "OMP_NUM_THREADS=1", "--env", "OMP_NUM_THREADS=2"]  # two, for compare
    code = main([*run_words(campaign, 2, *words, "--metric", rate, "--metric", thermo), "--", "lmp",
                 "-in", str(MELT), "-log", "none"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summaries = [json.loads(s) for (s,) in stored(campaign, "SELECT summary FROM runs")]
    energies = [f["value"] for s in summaries for f in s["figures"] if f["name"] == "TotEng"]
    assert len(energies) == 4 and all(e < 0 for e in energies)
    later_commands(campaign, tmp_path, capsys)
    other = tmp_path / "c2"
    lmp = ["lmp", "-in", str(MELT), "-log", "none"]
    assert main([*run_words(other, 2, "--metric", thermo), "--", *lmp]) == 2
    assert "metric TotEng: its value -2.2" in capsys.readouterr().err and not other.exists()


# --- 5, 6, 13: the metric file ---------------------------------------------------------------------------
METRIC_FILES = {
    "fifo": ("os.mkfifo('md.log')\n", "md.log: a FIFO, not a regular file"),
    "dev-zero": ("os.symlink('/dev/zero', 'md.log')\n", "md.log: "),
    "secret": ("os.symlink(os.environ['SECRET'], 'md.log')\n", "md.log: "),
}


@pytest.mark.parametrize("kind", list(METRIC_FILES))
def test_a_metric_file_is_a_regular_file_inside_the_trial(tmp_path, capsys, monkeypatch, kind):
    """The program makes its metric file a FIFO, a link to /dev/zero or to a secret in trial 1 (trial 0
    writes a plain one): the trial fails at once with the reason, nothing of the secret is stored; in a
    first trial the run stops (exit 2, nothing stored)."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$TOPSECRETSALT$hash:19000:0:99999:7:::\n")
    secret.chmod(0o600)
    monkeypatch.setenv("SECRET", str(secret))
    make, words = METRIC_FILES[kind]
    body = f"if trial == 1:\n    {make}else:\n    open('md.log', 'w').write('root:x:5:\\nrate 4.0\\n')\n"
    app = prog(tmp_path, body)
    campaign = tmp_path / "c"
    metric = ["--metric-file", "md.log", "--metric", r"r=rate (\S+)", "--metric", r"days=root:\S*?:(\d+):"]
    start = time.monotonic()
    assert main([*run_words(campaign, 3, "--no-evidence", "--timeout", "20", *metric), "--", PY, app]) == 1
    assert time.monotonic() - start < 20
    rows = stored(campaign, "SELECT trial, status, error FROM runs ORDER BY trial")
    assert [r[1] for r in rows] == ["ok", "failed", "ok"]
    assert words in rows[1][2], rows[1][2]
    for path in campaign.rglob("*"):  # the program's own link stays in its directory, not followed
        assert path.is_symlink() or not path.is_file() or b"TOPSECRETSALT" not in path.read_bytes(), path
    first = tmp_path / "first"
    app = prog(tmp_path, make, "first.py")
    capsys.readouterr()
    assert main([*run_words(first, 2, "--no-evidence", *metric), "--", PY, app]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--metric-file md.log" in err and "TOPSECRETSALT" not in err, err
    assert not first.exists()


# --- 7: finished trials are never dropped ----------------------------------------------------------------
def test_a_program_gone_at_trial_2_keeps_trials_0_and_1_and_resume_runs_the_rest(tmp_path, capsys):
    keep = tmp_path / "keep.sh"
    keep.write_text('#!/bin/sh\necho "rate 5.0"\n[ "$TAILSCOPE_TRIAL" = 1 ] && rm -f "$0"\nexit 0\n')
    keep.chmod(0o755)
    app = tmp_path / "app.sh"
    shutil.copy(keep, app)
    campaign = tmp_path / "c"
    argv = [*run_words(campaign, 5, "--no-evidence", "--metric", r"r=rate (\S+)"), "--", str(app)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such program" in err, err
    assert "2 trial(s) finished before it are stored" in err and "--resume" in err
    assert stored(campaign, "SELECT trial, status FROM runs ORDER BY trial") == [(0, "ok"), (1, "ok")]
    shutil.copy(keep, app)  # the program is back (a rebuild, the NFS mount)
    assert main(["run", "--resume", "--campaign", str(campaign), "--no-progress", "--no-evidence"]) == 0
    assert [t for (t,) in stored(campaign, "SELECT trial FROM runs ORDER BY trial")] == [0, 1, 2, 3, 4]


# --- 8, 14, 15: app definitions for check --app ----------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('argv = ["true"]\ntimeout = inf\n', ":2: timeout: expected seconds, a finite number > 0 and <= 6"),
        ('argv = ["true"]\ntimeout = nan\n', ":2: timeout: expected seconds"),
        ('argv = ["true"]\ntrials = 1000001\n', ":2: trials: expected a whole number from 1 to 1,000,000"),
        ('argv = ["true"]\ntrials = 1000000000000000000\n', ":2: trials: expected a whole number"),
        ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", ": not a TOML file tailscope can read (arrays or"),
        ("DEV_ZERO", ": cannot read the application definition (a character device, not a regular file)"),
        ("FIFO", ": cannot read the application definition (a FIFO, not a regular file)"),
    ],
    ids=["timeout-inf", "timeout-nan", "trials-1000001", "trials-10e18", "deep-toml", "dev-zero", "fifo"],
)
def test_check_app_refuses_what_the_command_line_refuses(tmp_path, capsys, text, words):
    import os

    path = tmp_path / "app.toml"
    if text == "DEV_ZERO":
        path = Path("/dev/zero")
    elif text == "FIFO":
        os.mkfifo(path)
    else:
        path.write_text(text)
    campaigns = tmp_path / "campaigns"
    os.environ["TAILSCOPE_CAMPAIGNS"] = str(campaigns)
    try:
        start = time.monotonic()
        code = main(["check", "--app", str(path), "--no-progress"])
    finally:
        del os.environ["TAILSCOPE_CAMPAIGNS"]
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"tailscope: error: {path}{words}"), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert time.monotonic() - start < 30 and not campaigns.exists()
