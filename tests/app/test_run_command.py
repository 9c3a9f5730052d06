"""`tailscope run [OPTIONS] -- CMD`: the command line, the figures, failed trials, variants, resume, SIGINT
and SIGKILL, through the real CLI and the real store (small Python programs stand in for applications here;
tests/app/test_live_apps.py runs LAMMPS, GROMACS and hpcc)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from app_tools import run_words, running, tailscope_child, tailscope_env, wait_for

from shell import as_from_a_shell
from store_tools import stored
from tailscope.cli import main

PY = sys.executable


def prog(tmp_path: Path, body: str, name: str = "app.py") -> str:
    path = tmp_path / name
    path.write_text("import os, sys, time\n" + body)
    return str(path)


def run(campaign: Path, trials: int, *words: str) -> int:
    return main(run_words(campaign, trials, *words))


# --- the command line ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "command", "words"),
    [
        (["stream"], ["ls"], "give a probe (stream) or a command after --, not both"),
        (["--page", "2m"], ["ls"], "--page is a probe option"),
        (["--offset=64m"], ["ls"], "--offset is a probe option"),
        (["--scaling"], ["ls"], "--scaling is a probe option"),
        (["--no-pages"], ["ls"], "--no-pages is a probe option"),
        (["--iterations", "5"], ["ls"], "--iterations is a probe option"),
        ([], [], "empty command after --"),
        ([], ["/nonexistent/app"], "/nonexistent/app: no such program"),
        ([], ["tailscope-no-such-app"], "tailscope-no-such-app: no such program on PATH"),
        ([], ["NOTEXEC"], "not executable"),
        (["--metric", "x=(unclosed"], ["ls"], "not a valid regular expression"),
        (["--metric", "x=no group"], ["ls"], "needs a capture group"),
        (["--metric", "bad name=(\\d+)"], ["ls"], "must be a word"),
        (["--metric", "x:s:sideways:y=(\\d+)"], ["ls"], "too many ':'"),
        (["--sanity", "[z"], ["ls"], "--sanity '[z': not a valid regular expression"),
        (["--iteration-regex", "(a"], ["ls"], "--iteration-regex"),
        (["--reference", "100"], ["ls"], "--reference '100': expected VALUE:-TOL,+TOL"),
        (["--reference", "nan:-5,+5"], ["ls"], "VALUE must be finite"),
        (["--env", "1X=3"], ["ls"], "--env '1X=3': expected NAME=VALUE"),
        (["--env", "NOVALUE"], ["ls"], "expected NAME=VALUE"),
        (["--metric-file", "/etc/passwd"], ["ls"], "inside the trial's directory"),
        (["--metric-file", "../x"], ["ls"], "inside the trial's directory"),
        (["--format", "nosuch"], ["ls"], "--format nosuch: expected one of"),
        (["--name", "a b"], ["ls"], "--name 'a b'"),
        (["--trials", "0"], ["ls"], "--trials"),
    ],
)
def test_bad_command_lines_are_one_line_and_store_nothing(tmp_path, capsys, options, command, words):
    notexec = tmp_path / "plain.sh"
    notexec.write_text("echo hi\n")
    notexec.chmod(0o644)
    command = [str(notexec) if w == "NOTEXEC" else w for w in command]
    campaign = tmp_path / "c"
    code = exit_code(
        [
            "run",
            *(["--trials", "2"] if "--trials" not in options else []),
            *options,
            "--campaign",
            str(campaign),
            "--",
            *command,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not campaign.exists()


def exit_code(argv: list[str]) -> int:
    """main's exit code, argparse's usage errors (SystemExit) included."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_all_probe_only_options_refused_before_parsing(capsys):
    for flag in ("--page", "--offset", "--scaling", "--no-pages", "--iterations"):
        with pytest.raises(SystemExit) as exc:
            main(["run", "--trials", "1", flag, "x", "--", "ls"])
        assert exc.value.code == 2
        assert f"{flag} is a probe option" in capsys.readouterr().err


def test_cmd_words_are_never_tailscope_options(tmp_path, capsys):
    """Everything after the first -- is the command's, even words that look like tailscope's options."""
    app = prog(tmp_path, "print('args:', ' '.join(sys.argv[1:]))\n")
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            1,
            "--metric",
            "n=args: .*--trials (\\d+)",
            "--",
            PY,
            app,
            "--trials",
            "7",
            "--page",
            "2m",
            "--",
        )
        == 0
    )
    assert stored(campaign, "SELECT value FROM runs") == [(7.0,)]


# --- figures --------------------------------------------------------------------------------------------
FIGURES = """
for step in range(5):
    print(f"step {step} took {0.25 + step / 100:.3f} s", flush=True)
print("Performance: 12.5 widgets/s", flush=True)
print("noise", file=sys.stderr)
print("Performance: 13.75 widgets/s", file=sys.stderr, flush=True)
print("Loop time of 1.5 on 1 procs")
"""


def test_figures_equal_what_the_program_printed(tmp_path):
    app = prog(tmp_path, FIGURES)
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            2,
            "--metric",
            "perf:widgets/s=Performance: ([0-9.]+)",
            "--metric",
            "loop:s=Loop time of ([0-9.]+)",
            "--iteration-regex",
            r"step \d+ took ([0-9.]+) s",
            "--sanity",
            "Loop time",
            "--",
            PY,
            app,
        )
        == 0
    )
    runs = stored(
        campaign,
        "SELECT metric, value, unit, higher_is_better, status, summary, config, "
        "wall_s, cpus, source FROM runs ORDER BY trial",
    )
    assert len(runs) == 2
    for metric, value, unit, hib, status, summary, config, wall_s, cpus, source in runs:
        # the last match counts (stderr's 13.75 came after stdout's 12.5), unit and direction as declared
        assert (metric, value, unit, hib, status, source) == ("perf", 13.75, "widgets/s", True, "ok", "app")
        figures = {f["name"]: f for f in json.loads(summary)["figures"]}
        assert figures["loop"]["value"] == 1.5 and figures["loop"]["higher_is_better"] is False
        assert figures["perf"]["raw"] == "Performance: 13.75 widgets/s"
        conf = json.loads(config)
        assert conf["exit_status"] == 0 and conf["argv"] == [PY, app]
        assert wall_s > 0 and cpus
    its = stored(campaign, "SELECT iteration, value FROM iterations ORDER BY run_id, iteration")
    assert [v for _, v in its[:5]] == [0.25, 0.26, 0.27, 0.28, 0.29]


def test_default_figure_is_wall_time(tmp_path):
    app = prog(tmp_path, "time.sleep(0.2)\n")
    campaign = tmp_path / "c"
    assert run(campaign, 2, "--", PY, app) == 0
    for metric, value, unit, hib, wall in stored(
        campaign, "SELECT metric, value, unit, higher_is_better, wall_s FROM runs"
    ):
        assert (metric, unit, hib) == ("wall_time", "s", False) and value == wall and 0.2 <= value < 10


def test_metric_file_of_the_trial_directory(tmp_path):
    app = prog(
        tmp_path, "open('result.txt', 'w').write('GFLOPS = 3.25\\nGFLOPS = 4.5\\n')\nprint('GFLOPS = 9')\n"
    )
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            1,
            "--metric-file",
            "result.txt",
            "--metric",
            "gflops:GFLOPS=GFLOPS = ([0-9.]+)",
            "--",
            PY,
            app,
        )
        == 0
    )
    assert stored(campaign, "SELECT value FROM runs") == [(4.5,)]
    work = next((campaign / "app").rglob("trial-000000"))
    assert (work / "result.txt").exists()  # the working directory is kept


def test_a_missing_metric_shows_the_end_of_the_output(tmp_path, capsys):
    """The line says what the output ended with: the last line's end, not its start (a progress line of a
    megabyte showed its first 120 'x' and never the figure that straddled a 1 MiB piece: found on issue
    30's acceptance pass)."""
    app = prog(tmp_path, "print('x' * 5000 + ' rate ok END')\n")
    assert run(tmp_path / "c", 1, "--metric", "x=value (\\d+)", "--", PY, app) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("x rate ok END')\n"), err


def test_first_trial_without_its_metric_stores_nothing(tmp_path, capsys):
    app = prog(tmp_path, "print('nothing to see')\n")
    campaign = tmp_path / "c"
    assert run(campaign, 3, "--metric", "x=value (\\d+)", "--", PY, app) == 2
    err = capsys.readouterr().err
    assert "metric x: no line of the output matched" in err and "nothing stored" in err
    assert not campaign.exists()


def test_nan_metric_in_the_first_trial_is_exit_2(tmp_path, capsys):
    app = prog(tmp_path, "print('value nan')\n")
    campaign = tmp_path / "c"
    assert run(campaign, 2, "--metric", "x=value (\\S+)", "--", PY, app) == 2
    assert "'nan' is not a finite number" in capsys.readouterr().err
    assert not campaign.exists()


def test_later_failures_are_failed_trials_with_reasons(tmp_path, capsys):
    # trial 1 misses its metric, trial 2 exits 3, trial 3 fails sanity, trial 4 runs past its time limit
    app = prog(
        tmp_path,
        """
t = int(os.environ["TAILSCOPE_TRIAL"])
if t != 1:
    print("value 5")
if t != 3:
    print("ALL OK")
if t == 2:
    print("bad input deck", file=sys.stderr)
    sys.exit(3)
if t == 4:
    time.sleep(30)
""",
    )
    campaign = tmp_path / "c"
    code = run(
        campaign, 5, "--timeout", "2", "--sanity", "ALL OK", "--metric", "x=value (\\d+)", "--", PY, app
    )
    assert code == 1
    rows = dict((t, (s, e)) for t, s, e in stored(campaign, "SELECT trial, status, error FROM runs"))
    assert rows[0] == ("ok", None)
    assert rows[1][0] == "failed" and "metric x: no line of the output matched" in rows[1][1]
    assert rows[2] == ("failed", "exit status 3: bad input deck")
    assert rows[3][0] == "failed" and "sanity pattern 'ALL OK' did not match" in rows[3][1]
    assert rows[4][0] == "timeout" and "2 s trial time limit" in rows[4][1]
    assert stored(campaign, "SELECT count(*) FROM runs WHERE value IS NOT NULL") == [(1,)]


def test_env_variants_interleaved_and_keep_commas(tmp_path):
    app = prog(tmp_path, "print('places', os.environ['OMP_PLACES'], 'n', len(os.environ['OMP_PLACES']))\n")
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            3,
            "--metric",
            "n=n (\\d+)",
            "--env",
            "OMP_PLACES={0:4},{4:4}",
            "--env",
            "OMP_PLACES=cores",
            "--",
            PY,
            app,
        )
        == 0
    )
    rows = stored(campaign, "SELECT variant, value, params, started_at FROM runs ORDER BY started_at")
    assert sorted({(json.loads(p)["env"][0], v) for _, v, p, _ in rows}) == [
        ("OMP_PLACES=cores", 5.0),
        ("OMP_PLACES={0:4},{4:4}", 11.0),
    ]
    order = [v for v, *_ in rows]
    assert all(a != b for a, b in itertools.pairwise(order))  # alternate trial by trial


def test_prepare_cleanup_and_warmup(tmp_path):
    log = tmp_path / "calls.log"
    app = prog(
        tmp_path,
        f"""
open({str(log)!r}, 'a').write('run ' + os.environ['TAILSCOPE_TRIAL'] + '\\n')
print('input', open('input.txt').read().strip())
""",
    )
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            2,
            "--warmup",
            "2",
            "--prepare",
            "echo 7 > input.txt",
            "--cleanup",
            f"echo cleaned >> {log}",
            "--metric",
            "x=input (\\d+)",
            "--",
            PY,
            app,
        )
        == 0
    )
    calls = log.read_text().split("\n")
    assert calls.count("cleaned") == 4 and sum(c.startswith("run ") for c in calls) == 4
    assert stored(campaign, "SELECT trial, value FROM runs ORDER BY trial") == [(0, 7.0), (1, 7.0)]


def test_failed_prepare_is_a_failed_trial(tmp_path):
    campaign = tmp_path / "c"
    assert run(campaign, 1, "--prepare", "exit 4", "--", "true") == 1
    ((status, error),) = stored(campaign, "SELECT status, error FROM runs")
    assert status == "failed" and error.startswith("--prepare 'exit 4' exited with status 4")


def test_default_name_skips_launchers(tmp_path):
    from tailscope.app.variant import default_name

    assert default_name(["mpirun", "-np", "4", "lmp", "-in", "x"]) == "lmp"
    assert default_name(["numactl", "--cpunodebind=0", "taskset", "-c", "0-3", "./stream"]) == "stream"
    assert default_name(["env", "OMP_NUM_THREADS=2", "/usr/bin/gmx", "mdrun"]) == "gmx"
    assert default_name(["srun", "--cpu-bind=cores", "nice", "-n", "5", "hpcc"]) == "hpcc"
    campaign = tmp_path / "c"
    app = prog(tmp_path, "print('ok')\n", name="stream")
    assert run(campaign, 1, "--", "env", "A=1", PY, app) == 0
    # the application called `python...`: never the probe stream, whatever its name
    ((probe,),) = stored(campaign, "SELECT probe FROM runs")
    assert probe.startswith("app:python")
    # a program that does not exist behind a launcher is refused too, before anything runs
    assert run(tmp_path / "d", 1, "--", "env", "A=1", str(tmp_path / "x")) == 2
    assert not (tmp_path / "d").exists()


def test_tree_is_not_its_own_corunner(tmp_path):
    """A command whose work is done by children (a shell starting busy Python processes): their CPU time is
    the application's own, never a co-runner of it."""
    busy = prog(tmp_path, "end = time.time() + 0.8\nwhile time.time() < end: pass\n", name="busy.py")
    campaign = tmp_path / "c"
    assert run(campaign, 2, "--", "sh", "-c", f"{PY} {busy} & {PY} {busy}; wait") == 0
    rows = stored(campaign, "SELECT cmdline FROM corunners")
    assert not [r for r in rows if r[0] and "busy.py" in r[0]], rows
    (cpus,) = stored(campaign, "SELECT cpus FROM runs LIMIT 1")[0]
    assert cpus


# --- interruptions --------------------------------------------------------------------------------------
def test_sigint_discards_the_trial_keeps_earlier_and_resume_continues(tmp_path):
    marker = tmp_path / "started"
    app = prog(
        tmp_path,
        f"""
t = int(os.environ['TAILSCOPE_TRIAL'])
print('value', t + 1, flush=True)
open({str(marker)!r} + str(t), 'w').close()
time.sleep(30 if t == 2 and not os.path.exists({str(marker)!r} + 'resumed') else 0)
""",
    )
    campaign = tmp_path / "c"
    proc = tailscope_child(
        *run_words(campaign, 4, "--metric", "x=value (\\d+)", "--", PY, app),
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_shell,
    )
    assert wait_for(lambda: Path(f"{marker}2").exists(), 120)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert stored(campaign, "SELECT trial, value FROM runs ORDER BY trial") == [(0, 1.0), (1, 2.0)]
    assert not list((campaign / "app").rglob("trial-000002*"))  # the discarded trial left nothing
    Path(f"{marker}resumed").touch()
    assert main(["run", "--resume", "--campaign", str(campaign), "--no-progress"]) == 0
    assert stored(campaign, "SELECT trial, value FROM runs ORDER BY trial") == [
        (0, 1.0),
        (1, 2.0),
        (2, 3.0),
        (3, 4.0),
    ]


def test_sigkill_of_run_leaves_no_process_of_the_trial(tmp_path, daemonize):
    """Done when: SIGKILL of `tailscope run -- CMD` leaves no process of the trial running, with a program
    that forks a setsid daemon (a real SIGKILL, the process table checked afterwards)."""
    pidfile = tmp_path / "daemon.pid"
    campaign = tmp_path / "c"
    proc = tailscope_child(
        *run_words(campaign, 3, "--", *daemonize, "600"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=tailscope_env(DAEMON_PID=str(pidfile)),
    )
    program: list[int] = []
    try:
        assert wait_for(pidfile.exists, 120)
        daemon = int(pidfile.read_text())
        program = [p for p in _tree(proc.pid) if p != daemon]
        assert program
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_for(lambda: not running(daemon), 60), "the setsid daemon outlived tailscope"
        assert wait_for(lambda: not any(running(p) for p in program), 60), "the program outlived tailscope"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in program + ([int(pidfile.read_text())] if pidfile.exists() else []):
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_daemon_left_by_a_trial_is_named_and_killed(tmp_path, daemonize):
    pidfile = tmp_path / "daemon.pid"
    campaign = tmp_path / "c"
    os.environ["DAEMON_PID"] = str(pidfile)
    try:
        assert run(campaign, 1, "--", *daemonize, "0.1") == 0
    finally:
        del os.environ["DAEMON_PID"]
    daemon = int(pidfile.read_text())
    assert wait_for(lambda: not running(daemon), 10)
    ((config,),) = stored(campaign, "SELECT config FROM runs")
    assert [k["pid"] for k in json.loads(config)["killed_at_end"]] == [daemon]


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def test_slow_start_is_not_counted(tmp_path):
    """(sanity of the clock: the trial's wall time is the command's, not tailscope's start-up)"""
    campaign = tmp_path / "c"
    t0 = time.monotonic()
    assert run(campaign, 1, "--", "true") == 0
    ((wall,),) = stored(campaign, "SELECT wall_s FROM runs")
    assert 0 < wall < time.monotonic() - t0


def test_reference_judges_the_node_whatever_its_peers_do(tmp_path, capsys):
    """--reference VALUE:-TOL,+TOL: a node whose median headline is outside is degraded (one node, no peers:
    only the reference can say so); inside it, the check passes."""
    app = prog(tmp_path, "print('value 500')\n")
    low = tmp_path / "low"
    assert run(low, 5, "--reference", "1000:-5,+5", "--metric", "x=value (\\d+)", "--", PY, app) == 0
    capsys.readouterr()
    assert main(["analyze", str(low), "--max-busy-share", "1"]) == 1
    out = capsys.readouterr().out
    assert "degraded - reference: median 500 is outside the reference 1000 (950 to 1050)" in out
    fine = tmp_path / "fine"
    assert run(fine, 5, "--reference", "510:-5,+5", "--metric", "x=value (\\d+)", "--", PY, app) == 0
    capsys.readouterr()
    assert main(["analyze", str(fine), "--max-busy-share", "1", "--verbose"]) == 0
    assert "median 500 is within the reference 510 (484.5 to 535.5)" in capsys.readouterr().out


def test_events_count_the_whole_tree(tmp_path):
    """--events: perf counters opened by the command itself before exec, inherited by every process it
    starts: two children each burning ~0.3 s of CPU show in task_clock (software events: no PMU needed)."""
    busy = prog(tmp_path, "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n", name="b.py")
    campaign = tmp_path / "c"
    assert run(campaign, 1, "--events", "software", "--", "sh", "-c", f"{PY} {busy} & {PY} {busy}; wait") == 0
    found = dict(stored(campaign, "SELECT event, value FROM counters WHERE source = 'perf'"))
    assert found["task_clock"] >= 0.6e9 * 0.95, found  # ns: both children's CPU time, not the shell's alone
    assert found["page_faults"] > 0 and "context_switches" in found


def test_events_that_do_not_resolve_are_refused(tmp_path, capsys):
    campaign = tmp_path / "c"
    assert run(campaign, 1, "--events", "no-such-event-xyz", "--", "true") == 2
    assert "--events no-such-event-xyz" in capsys.readouterr().err
    assert not campaign.exists()


def test_daemons_left_are_reported_once(tmp_path, daemonize, capsys):
    pidfile = tmp_path / "daemon.pid"
    os.environ["DAEMON_PID"] = str(pidfile)
    try:
        assert run(tmp_path / "c", 1, "--", *daemonize, "0.1") == 0
    finally:
        del os.environ["DAEMON_PID"]
    err = capsys.readouterr().err
    assert "left 1 process(es) running after its command ended: python" in err
    assert f"(pid {int(pidfile.read_text())})" in err


def test_srun_in_the_command_says_evidence_covers_this_node_only(tmp_path, capsys):
    from tailscope.app.variant import AppVariant, app_params

    (notice,) = AppVariant("app:lmp", app_params(["srun", "-n", "4", "lmp"])).notices()
    assert notice.startswith("tailscope: srun in the command: where it starts processes on other nodes, the ")
    assert "evidence and counters cover this node only" in notice
    assert AppVariant("app:lmp", app_params(["lmp", "-in", "srun"])).notices() == []


@pytest.mark.slow
def test_huge_output_is_kept_bounded_and_scanned_in_full(tmp_path):
    """300 MB of output: the figure on its last line is found (every line was scanned), the kept tail is
    64 KiB, and tailscope's memory does not grow with the output: its peak is compared with a control run
    of the same command printing 9 bytes (tailscope's own footprint, pandas and pyarrow, is ~150 MiB by
    itself, so a fixed bound would judge the libraries, not the output handling)."""

    def peak_kib(lines: int, name: str) -> tuple[int, Path]:
        app = prog(
            tmp_path,
            f"""
line = ("x" * 1000 + "\\n").encode()
out = sys.stdout.buffer
for _ in range({lines}):
    out.write(line)
out.write(b"final 77\\n")
""",
            name=name,
        )
        campaign = tmp_path / f"c-{name}"
        proc = subprocess.run(
            [
                "/usr/bin/time",
                "-f",
                "%M",
                PY,
                "-m",
                "tailscope",
                *run_words(campaign, 1, "--metric", "f=final (\\d+)", "--", PY, app),
            ],
            capture_output=True,
            text=True,
            env=tailscope_env(),
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        return int(proc.stderr.strip().splitlines()[-1]), campaign

    control_kib, _ = peak_kib(0, "quiet.py")
    huge_kib, campaign = peak_kib(300_000, "huge.py")
    # 300 MB went through the pipe; holding even a tenth of it would add 30 MiB over the control.
    assert huge_kib - control_kib < 30 * 1024, (huge_kib, control_kib)
    assert stored(campaign, "SELECT value FROM runs") == [(77.0,)]
    tail = next((campaign / "app").rglob("trial-000000.stdout"))
    assert len(tail.read_bytes()) <= 64 * 1024 and tail.read_text().endswith("final 77\n")
    ((config,),) = stored(campaign, "SELECT config FROM runs")
    assert json.loads(config)["stdout_bytes"] == 300_000 * 1001 + 9


PROGRAMS = Path(__file__).resolve().parents[1] / "importers" / "fixtures" / "programs"


def test_format_reader_takes_the_last_result_and_detection_hints(tmp_path, capsys):
    """--format uses the importers' one program reader: a LAMMPS log with two `run`s (real output, the
    importers' fixture) gives the last run's figures; without --format the output's format is named."""
    log = PROGRAMS / "lammps-melt-cpu-two-runs.log"
    campaign = tmp_path / "c"
    assert run(campaign, 1, "--", "cat", str(log)) == 0
    assert "the output looks like lammps's: `--format lammps`" in capsys.readouterr().err
    fmt = tmp_path / "f"
    assert run(fmt, 1, "--format", "lammps", "--", "cat", str(log)) == 0
    ((metric, value, unit, summary),) = stored(fmt, "SELECT metric, value, unit, summary FROM runs")
    assert (metric, value, unit) == ("loop_time", 2.35482, "s")
    figures = {f["name"]: f["value"] for f in json.loads(summary)["figures"]}
    assert figures["timesteps_per_s"] == 106.165
    # a format that does not match the output: the first trial stops the run, nothing stored
    bad = tmp_path / "b"
    assert run(bad, 2, "--format", "gromacs", "--", "cat", str(log)) == 2
    assert not bad.exists()


def test_format_table_output_keeps_every_row(tmp_path):
    """OSU's latency table (real output): one result per message size; the first row is the headline, every
    row's figure is kept with its size."""
    table = PROGRAMS / "osu-5.8-latency.txt"
    campaign = tmp_path / "c"
    assert run(campaign, 1, "--format", "osu", "--", "cat", str(table)) == 0
    ((value, summary),) = stored(campaign, "SELECT value, summary FROM runs")
    rows = [line.split() for line in table.read_text().splitlines() if line[:1].isdigit()]
    figures = json.loads(summary)["figures"]
    assert value == float(rows[0][1]) and len(figures) == len(rows)
    assert [f["value"] for f in figures] == [float(r[1]) for r in rows]
    assert all("params" in f for f in figures)


def test_next_hint_replays_the_stored_command_line(tmp_path):
    """The "next:" hints of an application replay its stored command line: parsed again, it is the same
    variant (same id), with the hint's own options."""
    import shlex

    from tailscope.app.cli import parse_run_command, variants_of
    from tailscope.app.variant import AppVariant, app_params, command_line

    params = app_params(
        ["mpirun", "-np", "2", "/opt/my app/bin/lmp", "-in", "in.lj"],
        ["OMP_PLACES={0:4},{4:4}"],
        metrics=[
            "tps:timesteps/s:higher=Performance: .*, ([0-9.]+) timesteps/s",
            "loop:s=Loop time of (\\S+)",
        ],
        sanity="Total wall time",
        iteration_regex="^step (\\d+)",
        reference="785:-5,+10",
        warmup=1,
        timeout_s=600.0,
        prepare="cp ~/case/* .",
    )
    original = AppVariant("app:lmp", params)
    line = command_line("app:lmp", params, "--trials", "100", "--campaign", "X-monitor")
    args = parse_run_command(shlex.split(line)[1:])
    assert args is not None and args.trials == 100 and str(args.campaign) == "X-monitor"
    (again,) = variants_of(args)
    assert again.variant_id == original.variant_id and dict(again.params) == dict(original.params)


def test_monitor_and_report_on_an_application_campaign(tmp_path, capsys):
    """--monitor runs tsmon beside the trials and cuts its samples per trial (source monitor); the report
    reads an application campaign as it reads a probe's."""
    app = prog(tmp_path, "time.sleep(0.5)\nprint('value 9')\n")
    campaign = tmp_path / "c"
    assert (
        run(
            campaign,
            3,
            "--monitor",
            "--monitor-interval",
            "100ms",
            "--metric",
            "v=value (\\d+)",
            "--",
            PY,
            app,
        )
        == 0
    )
    per_run = stored(
        campaign, "SELECT run_id, count(*) FROM counters WHERE source = 'monitor' GROUP BY run_id"
    )
    assert len(per_run) == 3 and all(n > 0 for _, n in per_run)
    assert main(["report", str(campaign), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "app:python" in html or "app:" in html
    assert main(["verdict", str(campaign), "--max-busy-share", "1", "--nhc", "--node", "nonexistent"]) in (
        0,
        2,
    )
    assert main(["verdict", str(campaign), "--max-busy-share", "1"]) in (0, 1, 3)
