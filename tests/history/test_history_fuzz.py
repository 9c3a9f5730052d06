"""Fuzzing the `history` verb through the command line, in-process (`main()`), as test_fuzz_cli.py fuzzes the
importers: seeded random command lines of every action (arguments and options drawn from valid values and
hostile ones: empty, control characters, markup, wildcards, numbers out of range, paths that are files,
devices or campaigns, unreadable URLs), and mutated histories (manifest and commit records) read by
`history show`. Whatever the input:
- the exit code is one the README's table gives the action: 0/1 for `show` (healthy/degraded), 0 for the
  others, 2 for usage or input errors, never an exception out of `main`;
- no Python traceback; a refusal is one line (`tailscope: error: ...`, or argparse's usage and one line);
- a refused command changes nothing in the history (byte for byte).

MUTATIONS command lines and STORE_MUTATIONS damaged histories in CI; TAILSCOPE_FUZZ=N for N of each.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tailscope.cli import main
from tailscope.history.directory import DirectoryHistory

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "importers"))
from campaigns import write_campaign
from synthetic import day_rows, make_fleet
from test_fuzz_cli import mutate, restore, snapshot

MUTATIONS = int(os.environ.get("TAILSCOPE_FUZZ", "60"))
STORE_MUTATIONS = int(os.environ.get("TAILSCOPE_FUZZ", "30"))
EXIT = {"show": {0, 1, 2}, "add": {0, 2}, "report": {0, 2}, "compact": {0, 2}, "note": {0, 2},
        "exclude": {0, 2}}  # fmt: skip

TEXT = ["", " ", "c0001", "c0002", "n\x1b[2Jx", "\u202ec0001", "<a href='x'>n</a>", "%", "_", "*",
        "c[1-8]", "ALL", "-", "--", "-x", "x" * 300, "\x00", "é", "stream", "stream-synthetic",
        "fan failure"]  # fmt: skip
DATES = ["2025-12-05", "2025-12-05T14:00", "2025-12-05T14:00Z", "2025-13-40", "yesterday", "", "0",
         "9999-12-31", "2025-12-05T25:00", "-1"]  # fmt: skip
NODES = ["c0000", "c0001", "c0002", "c0003"]
PROBES = ["stream", "dgemm-synthetic"]
THRESHOLDS = ["0.05", "0", "1", "-0.1", "nan", "inf", "1e-300", "5%", "", "0.999999"]


@pytest.fixture
def work() -> Iterator[Path]:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="tailscope-history-fuzz-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _history(root: Path) -> Path:
    """4 nodes x 20 days of two probes, one node 10% slower from day 12."""
    fleet, y, facts = make_fleet(4, 20, probes=2, seed=4)
    y[1, 0, 12:] -= 0.1
    store = DirectoryHistory(root / "H")
    for day in range(fleet.days):
        store.write(*day_rows(fleet, y, facts, day))
    return root / "H"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


def _check(action: str, code: int, err: str, argv: list[str]) -> None:
    assert code in EXIT[action], (code, err, argv)
    assert "Traceback" not in err, err
    if code == 2:
        ours = [x for x in err.splitlines() if x.startswith("tailscope: error:")]
        theirs = [x for x in err.splitlines() if ": error: " in x and not x.startswith("tailscope: error:")]
        assert (len(ours), len(theirs)) in ((1, 0), (0, 1)), err


def _argv(rng: random.Random, history: Path, others: dict[str, Path], ids: list[str]) -> list[str]:
    def pick(valid: list[str], hostile: list[str]) -> str:  # a valid value more often than not
        return rng.choice(valid if rng.random() < 0.6 else hostile)

    action = rng.choice(list(EXIT))
    target = pick([str(history)], [*(str(p) for p in others.values()), "postgresql://u:%zz@h/db"])
    argv = ["history", action, target]
    if action == "add":
        argv += [pick([str(others["campaign"])], [str(others["missing"]), str(others["file"]), "/dev/null"])]
        if rng.random() < 0.3:
            argv.append(pick([str(others["campaign"])], [str(history), str(others["file"])]))
    elif action in ("show", "report"):
        options = (("--node", NODES), ("--probe", PROBES), ("--since", DATES[:3]), ("--threshold", ["0.05"]))
        for flag, values in options:
            if rng.random() < 0.3:
                argv += [flag, pick(values, {"--since": DATES, "--threshold": THRESHOLDS}.get(flag, TEXT))]
        if action == "show":
            argv += rng.sample(["--json", "--series", "--prometheus"], k=rng.randint(0, 2))
            if argv[-1] == "--prometheus":
                argv.append(pick([str(others["out"] / "h.prom")], ["/dev/null/x.prom", str(history)]))
        else:
            argv += ["-o", pick([str(others["out"] / "h.html")], ["/dev/null/h.html", str(others["out"])])]
    elif action == "note":
        words = [pick(NODES, TEXT), pick(DATES[:3], DATES), pick(["DIMM B2 replaced"], TEXT)]
        argv += words[: rng.randint(1, 3)]
    elif action == "exclude":
        argv += [pick(NODES, TEXT), pick(ids, ["", "0", "0000", "%", "_", "ffff", " "])]
        if rng.random() < 0.3:
            argv += ["--variant", pick(PROBES, TEXT)]
        if rng.random() < 0.3:
            argv += ["--reason", rng.choice(TEXT)]
        if rng.random() < 0.3:
            argv.append("--undo")
    if rng.random() < 0.1:
        argv.insert(rng.randrange(2, len(argv) + 1), rng.choice(["--bogus", "-q", "--json=1", ""]))
    return argv


def test_history_command_lines_fuzz(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = _history(work)
    at = dt.datetime(2026, 1, 5, 2, tzinfo=dt.UTC)
    campaign = write_campaign(work / "c", at, {"c0001": 180.0}, trials=6)
    (work / "a-file").write_text("not a history\n")
    (work / "out").mkdir()
    others = {"campaign": campaign, "missing": work / "missing", "file": work / "a-file", "out": work / "out"}
    ids = sorted({str(c) for c in DirectoryHistory(history).read().entries["campaign"]})[:4]
    before = {"H": snapshot(history), "c": snapshot(campaign)}
    rng = random.Random("history-fuzz")
    outcomes: dict[int, int] = {}
    for _ in range(MUTATIONS):
        argv = _argv(rng, history, others, ids)
        code, err = _run(argv, capsys)
        _check(argv[1], code, err, argv)
        outcomes[code] = outcomes.get(code, 0) + 1
        assert snapshot(campaign) == before["c"], argv  # a campaign given to history is only read
        if code == 2:
            assert snapshot(history) == before["H"], (argv, err)
        else:
            restore(history, before["H"])
    answered = outcomes.get(0, 0) + outcomes.get(1, 0)
    assert outcomes.get(2, 0) >= MUTATIONS // 5 and answered >= MUTATIONS // 5, outcomes


def test_damaged_history_files_fuzz(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A history's manifest or a commit record changed at random (a crash on a shared file system, a
    hand edit): `history show` answers or refuses in one line, never a traceback."""
    history = _history(work)
    DirectoryHistory(history).compact()
    note = ["history", "note", str(history), "c0001", "2025-12-10", "fan replaced"]
    assert main(note) == 0  # a second commit record beside the compacted one
    files = [history / "campaign.json", *sorted((history / "commits").iterdir())]
    before = snapshot(history)
    rng = random.Random("history-store-fuzz")
    outcomes: dict[int, int] = {}
    for _ in range(STORE_MUTATIONS):
        target = rng.choice(files)
        target.write_bytes(mutate(target.read_text(), rng))
        argv = ["history", "show", str(history), *rng.sample(["--json", "--series", "--node", "c0001"], k=2)]
        argv = [a for a in argv if a != "--node"] if argv[-1] == "--node" else argv
        code, err = _run(argv, capsys)
        _check("show", code, err, argv)
        outcomes[code] = outcomes.get(code, 0) + 1
        restore(history, before)
    assert outcomes.get(2, 0) >= STORE_MUTATIONS // 10, outcomes
