"""One tailscope changes a node at a time (node/lock.py), and the journal obeys only entries it could have
written (node/journal_entry.py): issue 30, items 3, 12 and 16.

Live where it matters: real `tailscope inject thp-fragment` runs (the one injector that writes a sysctl,
/proc/sys/vm/compact_unevictable_allowed) side by side, real SIGKILLs at random points of each, and the
sysctl read back afterwards. Damaged and forged entries are planted in a journal of the test's own and fed to
the three readers: `inject --restore`, the next `inject`, and the restore helper.
"""

from __future__ import annotations

import functools
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journal_tools import (
    COMPACT,
    LOCKED_S,
    as_the_node_has_it,
    helper_of,
    inject_restore,
    pids_named,
    plant,
    ready_line,
    tailscope,
    wait_for,
)

from tailscope.errors import InputError
from tailscope.node import journal
from tailscope.node.journal_entry import PLACES_ENV, DamagedEntry, check
from tailscope.node.lock import WAIT_ENV, WAIT_S, NodeBusy, NodeLock, default_wait, lock_path

THP = ("inject", "thp-fragment", "--intensity", "0.002", "--reserve", "1g")  # ~64 MiB fragmented: ~1.5 s


@pytest.fixture
def sysctl() -> str:
    """compact_unevictable_allowed as the node has it (the injectors set 0 while they run)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: thp-fragment writes a sysctl")
    old = as_the_node_has_it(COMPACT)
    if old.strip() != "1":
        pytest.skip(f"compact_unevictable_allowed is {old.strip()} here: another run's, or the node's own")
    return old


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {journal.ENV_DIR: str(tmp_path / "journal")}


def entries(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env[journal.ENV_DIR]).glob("*.json"))


# -- item 3: two injectors at once ------------------------------------------------------------------------
@pytest.mark.root
def test_a_second_injector_waits_for_the_first_and_reads_the_nodes_own_value(
    sysctl: str, env: dict[str, str]
) -> None:
    """The issue's reproduction: a second thp-fragment started while the first runs read the first's 0 as
    the old value and left the node at 0. Now it waits for the node lock, then reads the node's own 1."""
    first = tailscope(*THP, "--duration", "3", env=env)
    second = None
    try:
        ready_line(first)
        second = tailscope(*THP, "--duration", "0.5", env=env)
        assert second.stdout is not None
        time.sleep(0.5)  # the first runs 3 s from its ready line: still in force
        assert not select.select([second.stdout], [], [], 0)[0], second.stdout.readline()  # waiting
        assert COMPACT.read_text().strip() == "0" and first.poll() is None
        first.communicate(timeout=60)
        assert first.returncode == 0
        ready_line(second)
        written = [json.loads(p.read_text()) for p in entries(env)]
        assert [e["value"] for e in written if e["action"] == "write"] == [sysctl]  # read: the node's own

        _, err = second.communicate(timeout=60)
        assert second.returncode == 0, err
        assert "restored" not in err and "Traceback" not in err
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=60)
    assert as_the_node_has_it(COMPACT) == sysctl
    assert not entries(env)


@pytest.mark.root
def test_a_run_killed_while_another_waits_is_put_back_by_the_waiter_whatever_its_journal(
    sysctl: str, tmp_path: Path
) -> None:
    """The first run keeps its journal in one directory, the second in another ($TAILSCOPE_JOURNAL_DIR: two
    checkouts' suites, or a run told to): the first is SIGKILLed, its helper too, while the second waits for
    the lock. The second, holding it now, used to read the first's 0 as the node's own and leave the node at
    0 (issue 30's item 3 again, across journals); it reads who held the lock before and puts back what that
    one left, from its journal, first."""
    env_a, env_b = ({journal.ENV_DIR: str(tmp_path / n)} for n in ("a", "b"))
    first = tailscope(*THP, env=env_a)
    second = None
    try:
        ready_line(first)
        assert COMPACT.read_text().strip() == "0"
        helper = helper_of(first.pid)
        assert helper is not None
        os.kill(helper, signal.SIGKILL)  # nothing restores on its own now
        wait_for("the helper gone", lambda: journal.start_time(helper) is None)
        second = tailscope(*THP, "--duration", "0.5", "--wait", "300", env=env_b)
        wait_for("the second at the lock", functools.partial(at_lock, second.pid, lock_path(tmp_path / "a")))
        first.kill()
        first.communicate(timeout=60)
        ready_line(second)
        written = [json.loads(p.read_text()) for p in entries(env_b)]
        assert [e["value"] for e in written if e["action"] == "write"] == [sysctl]  # the node's own
        _, err = second.communicate(timeout=120)
        assert second.returncode == 0 and "Traceback" not in err, err
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=60)
    wait_for("compact_unevictable_allowed back", lambda: as_the_node_has_it(COMPACT) == sysctl)
    assert not entries(env_a) and not entries(env_b)


@pytest.mark.root
def test_a_second_injector_refuses_in_one_line_and_never_undoes_the_first(
    sysctl: str, env: dict[str, str]
) -> None:
    first = tailscope(*THP, env=env)
    try:
        ready_line(first)
        second = subprocess.run(
            [sys.executable, "-m", "tailscope", *THP, "--duration", "1", "--wait", "0.3"],
            capture_output=True, text=True, timeout=60, env={**os.environ, **env},
        )  # fmt: skip
        assert second.returncode == 2, second
        [line] = second.stderr.splitlines()
        assert line.startswith(f"tailscope: error: pid {first.pid} (tailscope inject thp-fragment"), line
        assert "one tailscope changes a node at a time" in line and "waited 0.3 s" in line
        assert line.endswith("nothing was changed")
        assert COMPACT.read_text().strip() == "0"  # the first's change stands
        restore = inject_restore(env)  # the holder lives: nothing to restore, nothing touched
        assert restore.returncode == 0 and restore.stdout.startswith("nothing to restore"), restore
        assert f"pid {first.pid} (tailscope inject thp-fragment" in restore.stdout
        assert COMPACT.read_text().strip() == "0" and len(entries(env)) == 2  # the sysctl and tsinject
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 0
    assert as_the_node_has_it(COMPACT) == sysctl


def test_the_default_wait_is_the_environments_or_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WAIT_ENV, raising=False)
    assert default_wait() == WAIT_S
    monkeypatch.setenv(WAIT_ENV, "2.5")
    assert default_wait() == 2.5
    for bad in ("abc", "-1", "nan", "inf", "1e9", "10 s"):
        monkeypatch.setenv(WAIT_ENV, bad)
        expected = r"^\$TAILSCOPE_NODE_LOCK_WAIT=.*: expected seconds from 0 to 604800$"
        with pytest.raises(InputError, match=expected):
            default_wait()


def test_a_second_injector_waits_as_long_as_the_environment_says(tmp_path: Path) -> None:
    """This process holds the node lock; `tailscope inject` without --wait waits $TAILSCOPE_NODE_LOCK_WAIT
    seconds, then one line and exit 2, nothing changed; a bad value is one line too."""
    d = tmp_path / "journal"
    d.mkdir(mode=0o700)
    lock = NodeLock(lock_path(d))  # a descriptor of its own: to the CLI below, another tailscope
    lock.acquire(default_wait(), journal=d, start=0)
    try:
        argv = [sys.executable, "-m", "tailscope", "inject", "cpuoccupy", "--duration", "1"]
        bad = "$TAILSCOPE_NODE_LOCK_WAIT=soon: expected seconds"
        for wait, line in (("0.4", "waited 0.4 s"), ("soon", bad)):
            env = {**os.environ, journal.ENV_DIR: str(d), WAIT_ENV: wait}
            t0 = time.monotonic()
            out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
            assert out.returncode == 2 and len(out.stderr.splitlines()) == 1 and line in out.stderr, out
            assert time.monotonic() - t0 >= (0.4 if wait == "0.4" else 0)
        assert not list(d.glob("*.json"))
    finally:
        lock.release()


def test_inject_restore_waits_for_a_holder_that_keeps_its_journal_elsewhere(tmp_path: Path) -> None:
    """A holder restores what dead runs left in its own journal when it takes the lock: one whose journal is
    elsewhere (another suite's test) restored none of this one's, so `inject --restore` waits for it (as
    long as any verb waits) instead of saying "nothing to restore" over entries nobody will put back."""
    d, elsewhere = tmp_path / "journal", tmp_path / "another"
    elsewhere.mkdir(mode=0o700)
    target = tmp_path / "knob"
    target.write_text("changed\n")
    entry = plant(d, dead_owner(), target, "original\n")
    env = {journal.ENV_DIR: str(d), PLACES_ENV: str(tmp_path), WAIT_ENV: "30"}
    for holders_journal in (d, elsewhere):
        lock = NodeLock(lock_path(d))  # a descriptor of its own: to the CLI, another tailscope
        lock.acquire(default_wait(), journal=holders_journal, start=0)
        restore = subprocess.Popen(
            [sys.executable, "-m", "tailscope", "inject", "--restore"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
        )  # fmt: skip
        if holders_journal == d:  # it put back what was there when it took the lock: nothing to wait for
            out, err = restore.communicate(timeout=60)
            lock.release()
            assert restore.returncode == 0 and out.startswith("nothing to restore"), (out, err)
            assert "holds the node lock" in out and entry.exists()
            continue
        wait_for("inject --restore at the lock", functools.partial(at_lock, restore.pid, lock.path))
        time.sleep(0.3)  # it polls the lock (flock, non-blocking) and waits
        assert restore.poll() is None
        lock.release()
        out, err = restore.communicate(timeout=60)
        assert restore.returncode == 0, (out, err)
        assert out.splitlines()[0].endswith(f"{target} back to 'original'"), out
        assert not entry.exists() and target.read_text() == "original\n"


def test_the_helper_says_damaged_entries_a_holder_elsewhere_never_read(tmp_path: Path) -> None:
    """A dead run's helper finds the lock held: a holder with the same journal said the damaged entries when
    it took the lock, so the helper is done; one that keeps its journal elsewhere never read them, so the
    helper waits for the lock and says them itself (exit 1)."""
    d, elsewhere = tmp_path / "journal", tmp_path / "another"
    elsewhere.mkdir(mode=0o700)
    owner = dead_owner()
    d.mkdir(mode=0o700)
    bad = d / f"{owner.tag()}-00001.json"
    bad.write_text(json.dumps([valid(owner, tmp_path / "knob")]))  # a list: damaged
    env = {**os.environ, journal.ENV_DIR: str(d), PLACES_ENV: str(tmp_path)}
    argv = [sys.executable, "-m", "tailscope.node.journal", "watch", str(owner.pid), str(owner.start), str(d)]
    for holders_journal in (d, elsewhere):
        lock = NodeLock(lock_path(d))
        lock.acquire(default_wait(), journal=holders_journal, start=0)
        helper = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if holders_journal == d:
            _, err = helper.communicate(timeout=60)
            lock.release()
            assert helper.returncode == 0 and err == "", err
            continue
        t0 = time.monotonic()  # it tries the lock every 0.1 s (a moment each): waiting is being alive
        while helper.poll() is None and time.monotonic() - t0 < 5.0:
            time.sleep(0.05)
        assert helper.poll() is None, helper.communicate()
        lock.release()
        _, err = helper.communicate(timeout=60)
        assert helper.returncode == 1, err
        assert err.startswith(f"tailscope restore helper: damaged journal entry {bad}: a JSON list"), err
    assert bad.exists()


def at_lock(pid: int, lock: Path) -> bool:
    """Process `pid` has the lock file open (it is trying to take it)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(fd) == str(lock):
                return True
        except OSError:
            continue
    return False


@pytest.mark.root
@pytest.mark.slow
def test_random_sigkills_of_concurrent_injectors_leave_the_node_as_it_was(
    sysctl: str, env: dict[str, str]
) -> None:
    """Three injectors at once, each SIGKILLed at a random moment (waiting for the lock, writing the sysctl,
    starting tsinject, fragmenting, running, stopping) or left to end; three rounds. Afterwards the sysctl is
    the node's own, no tsinject of theirs runs and the journal is empty."""
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    before = pids_named("tsinject")
    for round_ in range(3):
        procs = []
        for _ in range(3):
            time.sleep(rng.uniform(0, 0.6))
            duration = f"{rng.uniform(0.3, 1.5):.2f}"
            procs.append(tailscope(*THP, "--duration", duration, "--wait", "60", env=env))
        kills = sorted((rng.uniform(0, 4), p) for p in procs if rng.random() < 0.8)
        t0 = time.monotonic()
        for at, proc in kills:
            time.sleep(max(0.0, at - (time.monotonic() - t0)))
            proc.kill()
        for proc in procs:
            proc.communicate(timeout=180)
        why = f"round {round_}, seed {seed}, kills at {[round(at, 2) for at, _ in kills]}"
        wait_for(f"compact_unevictable_allowed back ({why})", lambda: as_the_node_has_it(COMPACT) == sysctl)
        wait_for(f"tsinject gone ({why})", lambda: not pids_named("tsinject") - before)
        wait_for(f"the journal empty ({why})", lambda: not entries(env))
    assert as_the_node_has_it(COMPACT) == sysctl


def test_the_lock_is_held_from_the_first_read_until_every_change_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: no entry without the lock (its old value would have been read without it), and the lock
    outlives `unhold` while a change of this process is still in force."""
    monkeypatch.setenv(PLACES_ENV, str(tmp_path))
    knob = tmp_path / "knob"
    (tmp_path / "journal").mkdir()
    j = journal.Journal(tmp_path / "journal")
    with pytest.raises(RuntimeError, match="without the node lock"):
        j.record("write", path=str(knob), value="old\n")
    path = lock_path(j.directory)
    j.hold()  # another tailscope on this node (another suite's): its turn first
    j.hold(0)  # counted: no second flock of this process's own lock (it would wait for itself)
    entry = j.record("write", path=str(knob), value="old\n")
    j.unhold()
    j.unhold()
    with pytest.raises(NodeBusy, match="one tailscope changes a node at a time"):
        NodeLock(path).acquire(0, journal=j.directory, start=0)  # another descriptor: another tailscope
    assert j.holding
    j.forget(entry)  # undone: now it is given back
    assert not j.holding
    other = NodeLock(path)
    assert other.acquire(default_wait(), journal=j.directory, start=0)
    other.release()
    assert j.helper_pid is not None
    os.kill(j.helper_pid, signal.SIGKILL)  # nothing left for it: this process is its run and lives on


# -- item 12: damaged entries ------------------------------------------------------------------------------
def dead_owner() -> journal.Owner:
    me = journal.Owner.this_process()
    return journal.Owner(me.pid, me.start + 1, me.boot)  # this pid, another start time: a run that is gone


def valid(owner: journal.Owner, target: Path) -> dict[str, object]:
    return {
        "format": 1, "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot}, "seq": 1,
        "action": "write", "path": str(target), "value": "original\n",
    }  # fmt: skip


DAMAGED = {
    "no owner": lambda e: json.dumps({k: v for k, v in e.items() if k != "owner"}),
    "pid abc": lambda e: json.dumps({**e, "owner": {**e["owner"], "pid": "abc"}}),
    "a list": lambda e: json.dumps([e]),
    "truncated": lambda e: json.dumps(e)[:40],
    "no action": lambda e: json.dumps({k: v for k, v in e.items() if k != "action"}),
    "value a number": lambda e: json.dumps({**e, "value": 7}),
}


def test_a_damaged_entry_is_one_line_for_every_reader_never_a_traceback(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """Each damage of DAMAGED in an entry of its own (of one dead run): `inject --restore`, the next
    `inject` and the dead run's restore helper each say every one in one line and leave it alone."""
    owner = dead_owner()
    target = tmp_path / "knob"
    target.write_text("changed\n")
    d = Path(env[journal.ENV_DIR])
    d.mkdir()
    bad = []
    for seq, damage in enumerate(DAMAGED.values(), 1):
        bad.append(d / f"{owner.tag()}-{seq:05d}.json")
        bad[-1].write_text(damage(valid(owner, target)))
    full = {**os.environ, **env, PLACES_ENV: str(tmp_path)}

    def said(text: str, prefix: str) -> list[str]:
        lines = [line for line in text.splitlines() if "damaged journal entry" in line]
        assert all(line.startswith(f"{prefix}damaged journal entry ") for line in lines), text
        assert [p for p in bad if any(f" {p}: " in line for line in lines)] == bad, text
        assert len(lines) == len(bad) and all(line.endswith("then remove it)") for line in lines), text
        return lines

    restore = subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", "--restore"],
        capture_output=True, text=True, timeout=LOCKED_S, env=full,
    )  # fmt: skip
    assert restore.returncode == 1 and "Traceback" not in restore.stderr, restore
    lines = said(restore.stdout, "")
    later = subprocess.run(
        [sys.executable, "-m", "tailscope", "inject", "cpuoccupy", "--intensity", "0.05", "--duration", ".2"],
        capture_output=True, text=True, timeout=LOCKED_S, env=full,
    )  # fmt: skip
    assert later.returncode == 0 and "Traceback" not in later.stderr, later
    assert said(later.stderr, "tailscope: ") == [f"tailscope: {line}" for line in lines]
    helper = subprocess.run(
        [sys.executable, "-m", "tailscope.node.journal", "watch", str(owner.pid), str(owner.start), str(d)],
        capture_output=True, text=True, timeout=LOCKED_S, env=full,
    )  # fmt: skip
    assert helper.returncode == 1 and "Traceback" not in helper.stderr, helper
    said(helper.stderr, "tailscope restore helper: ")
    assert all(p.exists() for p in bad) and target.read_text() == "changed\n"  # nobody knows what it meant
    assert {line.split(": ", 1)[1].split(";")[0] for line in lines} >= {
        "owner: 'pid' is 'abc', expected a whole number >= 1",
        "a JSON list, expected an object",
        "'action' is missing, expected one of write, mkdir, move, process",
    }


def test_an_entry_without_what_is_restored(tmp_path: Path, env: dict[str, str]) -> None:
    """`what` is said from the fields, never read from the entry (one without it was a KeyError)."""
    owner = dead_owner()
    target = tmp_path / "knob"
    target.write_text("changed\n")
    entry = plant(Path(env[journal.ENV_DIR]), owner, target, "original\n")
    data = json.loads(entry.read_text())
    del data["what"]
    entry.write_text(json.dumps(data))
    out = inject_restore({**env, PLACES_ENV: str(tmp_path)})
    assert out.returncode == 0, out
    assert out.stdout.splitlines() == [f"restored what pid {owner.pid} left: {target} back to 'original'"]
    assert target.read_text() == "original\n" and not entry.exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=6),
    max_leaves=20,
)
KEYS = ("format", "owner", "seq", "action", "path", "value", "pid", "pid_start", "group", "origin", "name")
OWNER = ("pid", "start", "boot")
LIKELY = JSON | st.sampled_from(["write", "mkdir", "move", "process", "/proc/sys/vm/x", 1, 0, -1])
NEAR_ENTRY = st.fixed_dictionaries(  # close to a real entry: every field there or not, of any type
    {"format": st.just(1), "owner": st.fixed_dictionaries({}, optional={k: LIKELY for k in OWNER})},
    optional={k: LIKELY for k in KEYS[2:]},
)


@settings(max_examples=100, deadline=None)
@given(JSON | NEAR_ENTRY)
def test_any_json_is_an_entry_or_one_reason(data: object) -> None:
    try:
        fields = check(data)
    except DamagedEntry as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    journal.Entry(Path("x.json"), fields).what  # noqa: B018 -- a checked entry is said without an error


# -- item 16: forged entries -------------------------------------------------------------------------------
def test_a_path_that_climbs_out_of_proc_sys_is_never_written(tmp_path: Path, env: dict[str, str]) -> None:
    owner = dead_owner()
    target = tmp_path / "x"
    target.write_text("changed\n")
    forged = Path("/proc/sys/../..") / str(target).lstrip("/")
    entry = plant(Path(env[journal.ENV_DIR]), owner, forged, "original\n")
    out = inject_restore(env)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out
    [line] = [x for x in out.stdout.splitlines() if x.startswith("damaged")]
    assert f"{forged} (resolves to {target}) is not a file tailscope writes" in line
    assert target.read_text() == "changed\n" and entry.exists()


def test_a_process_entry_stops_only_a_tsinject(env: dict[str, str], victim: subprocess.Popen[bytes]) -> None:
    """A forged `process` entry with the victim's true start time: the victim is not a tsinject, so it runs
    on; the entry is said and left."""
    owner = dead_owner()
    d = Path(env[journal.ENV_DIR])
    d.mkdir()
    data = {
        "format": 1, "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot}, "seq": 1,
        "action": "process", "pid": victim.pid, "pid_start": journal.start_time(victim.pid),
        "name": "tsinject cpuoccupy",
    }  # fmt: skip
    (d / f"{owner.tag()}-00001.json").write_text(json.dumps(data))
    out = inject_restore(env)
    assert out.returncode == 1, out
    assert f"pid {victim.pid} is 'sleep', not a process tailscope starts (tsinject)" in out.stdout
    time.sleep(0.3)
    assert victim.poll() is None


@pytest.mark.root
def test_a_cgroup_tailscope_did_not_make_is_never_removed(
    env: dict[str, str], victim: subprocess.Popen[bytes]
) -> None:
    """A forged `mkdir` entry naming a cgroup of someone else's, with a process in it: restore used to move
    the process out and remove the cgroup."""
    from tailscope.inject.cgroups import cpu_hierarchy

    hierarchy = cpu_hierarchy()
    origin = hierarchy.cgroup_of(victim.pid)
    group = hierarchy.root / f"someone-else-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cgroup.procs").write_text(f"{victim.pid}\n")
        owner = dead_owner()
        d = Path(env[journal.ENV_DIR])
        d.mkdir()
        data = {
            "format": 1, "owner": {"pid": owner.pid, "start": owner.start, "boot": owner.boot}, "seq": 1,
            "action": "mkdir", "path": str(group),
        }  # fmt: skip
        (d / f"{owner.tag()}-00001.json").write_text(json.dumps(data))
        out = inject_restore(env)
        assert out.returncode == 1, out
        assert f"{group} is not a tailscope-* cgroup" in out.stdout
        assert group.is_dir() and hierarchy.cgroup_of(victim.pid) == group
    finally:
        (origin / "cgroup.procs").write_text(f"{victim.pid}\n")
        group.rmdir()
