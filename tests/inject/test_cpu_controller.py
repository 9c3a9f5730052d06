"""The cpu controller cpu-quota enables in a cgroup v2 root is a change like any other: journaled before it is
made, taken back when the injection ends, SIGKILL included (inject/cgroups.py, node/journal.py).

It used to be written by `cpu_hierarchy()` itself, without a journal entry (so never undone) and without the
node lock (validate asks it to see whether cpu-quota can run). This VM binds the cpu controller to a v1
hierarchy (/sys/fs/cgroup/cpu), so no v2 root here has it to give: the v2 root is a directory in the kernel's
format (cgroup.controllers, cgroup.subtree_control, a cgroup's cpu.max), named as a cgroup2 mount in a mount
table of the test's own, and the journal may write there ($TAILSCOPE_JOURNAL_PLACES). A regular file keeps
what was written last: `+cpu` while the injection runs, the `-cpu` that takes it back afterwards. The kernel's
side (the controller really handed to children, EBUSY when a child hands it on) is untested on a real v2 cpu
hierarchy.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from journal_tools import DEADLINE_S, ready_line, sigkill, wait_for

from tailscope.inject import cgroups
from tailscope.inject.cgroups import cpu_hierarchy
from tailscope.node import journal
from tailscope.node.journal_entry import CPU_CONTROLLER_OFF, PLACES_ENV, check, refusal

OWN = "memory pids\n"  # what the node's root hands its children before tailscope


@pytest.fixture
def v2(tmp_path: Path) -> tuple[Path, Path]:
    """(a v2 root that has cpu and does not hand it on, a mount table naming it)."""
    root = tmp_path / "cgroup2"
    (root / "job").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids\n")
    (root / "cgroup.subtree_control").write_text(OWN)
    (root / "job" / "cpu.max").write_text("max 100000\n")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"sysfs /sys sysfs rw 0 0\ncgroup2 {root} cgroup2 rw,nosuid,nodev,noexec 0 0\n")
    return root, mounts


def test_finding_the_hierarchy_changes_nothing(v2: tuple[Path, Path]) -> None:
    root, mounts = v2
    h = cpu_hierarchy(mounts)
    assert (h.version, h.root, h.enable) == (2, root, root / "cgroup.subtree_control")
    assert (root / "cgroup.subtree_control").read_text() == OWN
    (root / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert cpu_hierarchy(mounts).enable is None  # handed on already: nothing to enable


def test_finding_the_nodes_own_hierarchy_changes_nothing() -> None:
    v2_roots = [Path(f.split()[1]) for f in Path("/proc/self/mounts").read_text().splitlines()
                if f.split()[2] == "cgroup2"]  # fmt: skip
    before = {p: (p / "cgroup.subtree_control").read_text() for p in v2_roots}
    with contextlib.suppress(cgroups.InjectInputError):
        cpu_hierarchy()
    assert {p: (p / "cgroup.subtree_control").read_text() for p in v2_roots} == before


@pytest.mark.root
def test_cpu_enabled_while_the_quota_holds_and_taken_back_after(
    v2: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tailscope.inject.control import Injection

    root, mounts = v2
    monkeypatch.setattr(cgroups, "MOUNTS", mounts)
    monkeypatch.setenv(PLACES_ENV, str(tmp_path))
    subtree, quota = root / "cgroup.subtree_control", root / "job" / "cpu.max"
    with Injection.of("cpu-quota", 0.5, cgroup=root / "job") as inj:
        assert subtree.read_text() == "+cpu\n" and quota.read_text() == "50000 100000\n"
        me = journal.this_journal()
        mine = [e for e in journal.read_entries(me.directory) if e.owner == me.owner]
        assert [(e.data["path"], e.data["value"]) for e in mine] == [
            (str(subtree), CPU_CONTROLLER_OFF),  # first: taken back last
            (str(quota), "max 100000\n"),
        ]
        assert inj.ready["cgroup"] == str(root / "job")
    assert subtree.read_text() == CPU_CONTROLLER_OFF and quota.read_text() == "max 100000\n"
    assert not [p for p in journal.this_journal().directory.glob(f"{journal.this_journal().owner.tag()}-*")]


INJECT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tailscope.inject import cgroups
    cgroups.MOUNTS = Path(sys.argv[1])  # the v2 root the test made, as the node's mount table would name it
    from tailscope.cli import entry
    sys.argv = ["tailscope", "inject", "cpu-quota", "--cgroup", sys.argv[2], "--intensity", "0.5"]
    entry()
""")


@pytest.mark.root
def test_sigkill_takes_the_cpu_controller_back(v2: tuple[Path, Path], tmp_path: Path) -> None:
    root, mounts = v2
    env = {journal.ENV_DIR: str(tmp_path / "journal"), PLACES_ENV: str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", INJECT, str(mounts), str(root / "job")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env},
    )  # fmt: skip
    ready_line(proc)
    subtree = root / "cgroup.subtree_control"
    assert subtree.read_text() == "+cpu\n"
    err = sigkill(proc)
    wait_for("cpu taken back", lambda: subtree.read_text() == CPU_CONTROLLER_OFF, DEADLINE_S)
    assert (root / "job" / "cpu.max").read_text() == "max 100000\n"
    assert f"{subtree} back to '-cpu'" in err
    assert not list((tmp_path / "journal").glob("*.json"))


def _entry(path: Path, value: str) -> dict[str, object]:
    return {"format": 1, "owner": {"pid": 1, "start": 0, "boot": "x"}, "seq": 1, "action": "write",
            "path": str(path), "value": value}  # fmt: skip


def test_only_the_cpu_controller_is_ever_taken_away() -> None:
    """A forged entry may not switch controllers on or off for the node's cgroups: `-cpu` is the one write."""
    v2_roots = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                if line.split()[2] == "cgroup2"]  # fmt: skip
    if not v2_roots:
        pytest.skip("no cgroup v2 mounted")
    subtree = Path(v2_roots[0]) / "cgroup.subtree_control"
    assert refusal(check(_entry(subtree, CPU_CONTROLLER_OFF))) is None
    for value in ("+cpu\n", "-memory\n", "-cpu -memory\n", ""):
        why = refusal(check(_entry(subtree, value)))
        assert why is not None and "is not the -cpu tailscope writes there" in why, value
    elsewhere = Path("/proc/sys/vm/cgroup.subtree_control")  # the name alone is not a cgroup's
    assert "not a cgroup's controllers" in (refusal(check(_entry(elsewhere, CPU_CONTROLLER_OFF))) or "")


def test_cpu_left_on_when_a_child_cgroup_hands_it_on_since(
    v2: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel refuses `-cpu` (EBUSY) while a child cgroup enables cpu for its own children (Slurm's or
    systemd's, started during the injection): that is theirs now; said, the entry done with. Any other
    failure stays a failure (the entry kept, the next run refuses). EBUSY is the kernel's answer, given here
    by the write (no v2 cpu hierarchy on this VM)."""
    root, _ = v2
    subtree = root / "cgroup.subtree_control"
    fields = _entry(subtree, CPU_CONTROLLER_OFF)
    monkeypatch.setenv(PLACES_ENV, str(root.parent))

    def busy(path: Path, value: str) -> None:
        raise OSError(errno.EBUSY, os.strerror(errno.EBUSY))

    monkeypatch.setattr(journal, "_write", busy)
    with pytest.raises(OSError):  # no child uses it: a real failure
        journal.undo(fields, {})
    (root / "job" / "cgroup.subtree_control").write_text("cpu memory\n")
    note = journal.undo(fields, {})
    assert note == f"cpu controller left on in {subtree}: {root / 'job'} enable it for their children now"
