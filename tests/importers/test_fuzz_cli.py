"""Fuzzing every importer and the campaign spec through the command line, in-process (`main()`): each mutated
file is imported into a campaign that already holds a valid import (or, for the spec, submitted with
--dry-run beside a campaign an earlier submit made). Whatever the input:
- the exit is 0, 2 or 130 (argparse's exit too), never an exception out of `main`;
- a refusal is one line on stderr, and no Python traceback is printed;
- a failed command stores nothing: the campaign directory is unchanged byte for byte.

Mutations are seeded (the same ones every run): MUTATIONS per importer in CI, TAILSCOPE_FUZZ=5000 for more.
The readers' own properties (fast and line readers agree) are fuzzed in test_fuzz_every_importer.py.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_fuzz_every_importer import ITERATIONS, LIKWID, PERF, PERFCOUNTS

from spec_examples import FLEET_SPEC
from tailscope.cli import main

MUTATIONS = int(os.environ.get("TAILSCOPE_FUZZ", "300"))
FIXTURES = Path(__file__).parent / "fixtures"

SPEC_DIRECTORY_LINE = 'directory = "campaigns/fleet"'  # kept: a mutated path could point anywhere

TOKENS = [
    ",", ",,", '"', "'", "\n", "\r\n", "\r", "\ufeff", "\x00", "\x1b[2J", "é", "\ud800", "-", "+", "=",
    "nan", "inf", "-inf", "1e308", "1e-320", "8e300", "-5", "0", str(2**31), str(2**63), str(2**64),
    "99999999999999999999999", "0x", "0xffffffffffffffffffff", "[", "]", "[0]", '["X"]', "{", "}", " = ",
    "#", "--", "true", "maybe", "GB/s", "CPU7", "HWThread 5", "<not counted>", "TABLE,Group 2 Raw,X,1",
    "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=   0.00123 ...... PASSED", "WR11C2R4", "N      :",
    "P      :   99999999999999999999999", "Gflops", "tsc[9] = 1", "[[probes]]", 'probe = "fwq"',
    "trials = -1", "[slurm]", "nodes = 3", "c[0001-0008],ALL", "node", "run", "iteration", "value",
]  # fmt: skip


def mutate(text: str, rng: random.Random) -> bytes:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["chars", "chars", "insert", "delete", "dup", "swap", "truncate", "flip"])
        i = rng.randrange(max(1, len(lines)))
        if kind == "chars" and lines:
            line = lines[i]
            k = rng.randint(0, len(line))
            lines[i] = line[:k] + rng.choice(TOKENS) + line[k + rng.randint(0, 6) :]
        elif kind == "insert":
            lines.insert(i, rng.choice(TOKENS))
        elif kind == "delete" and lines:
            del lines[i]
        elif kind == "dup" and lines:
            lines.insert(i, lines[i])
        elif kind == "swap" and len(lines) > 1:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "truncate" and lines:
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: rng.randint(0, len(lines[-1]))]
        elif kind == "flip" and lines and lines[i]:
            k = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:k] + chr(ord(lines[i][k]) ^ (1 << rng.randrange(7))) + lines[i][k + 1 :]
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if rng.random() < 0.2:
        data = data[: rng.randint(0, len(data))]
    return data


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A directory in memory where there is one (/dev/shm): a stored import fsyncs ~18 times, which on a
    busy disk is most of its time; the fuzzing is about what is refused and kept, not about the disk."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="tailscope-fuzz-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under `root`, by relative path."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = None if path.is_dir() else path.read_bytes()
    return out


def restore(root: Path, saved: dict[str, bytes | None]) -> None:
    """Put `root` back as `saved` (after a command that stored something)."""
    for path in sorted(root.rglob("*"), reverse=True):
        key = str(path.relative_to(root))
        if key not in saved:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    for key, data in saved.items():
        path = root / key
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
        elif not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses an option: exit 2 with its usage line
        code = exc.code if isinstance(exc.code, int) else 2
    return code, capsys.readouterr().err


def check_outcome(code: int, err: str, before: dict[str, bytes | None], root: Path, argv: list[str]) -> None:
    assert code in (0, 2, 130), (code, err, argv)
    assert "Traceback" not in err, err
    if code != 0:
        lines = [x for x in err.splitlines() if x.startswith("tailscope: error:")]
        assert len(lines) == 1, err
        after = snapshot(root)
        changed = sorted(k for k in set(before) | set(after) if before.get(k, b"?") != after.get(k, b"?"))
        assert not changed, (f"a failed command changed {changed}", err)


IMPORTS: dict[str, tuple[Callable[[], str], str, list[str]]] = {
    "iterations": (lambda: ITERATIONS, "it.csv", ["--higher-is-better"]),
    "hpl": (lambda: (FIXTURES / "xhpl-2.3-three-runs.out").read_text(), "xhpl.out", ["--node", "n1"]),
    "perfcounts": (lambda: PERFCOUNTS, "n1.perfcounts.lua", []),
    "perf-csv": (lambda: PERF, "perf.csv", ["--node", "n1"]),
    "likwid-csv": (lambda: LIKWID, "likwid.csv", ["--node", "n1"]),
}


@pytest.mark.parametrize("fmt", list(IMPORTS))
def test_import_fuzz_through_main(fmt: str, work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path = work
    text, file_name, options = IMPORTS[fmt]
    valid = text()
    campaign = tmp_path / "c"
    seed = tmp_path / f"seed-{file_name}"
    seed.write_text(valid)
    code, err = run_main(["import", fmt, str(seed), "--campaign", str(campaign), *options], capsys)
    assert code == 0, err
    before = snapshot(campaign)
    rng = random.Random(f"{fmt}-fuzz")
    outcomes = {0: 0, 2: 0, 130: 0}
    count = MUTATIONS
    for k in range(count):
        path = tmp_path / "in" / str(k) / file_name  # the name perfcounts reads the node from, kept
        path.parent.mkdir(parents=True)
        path.write_bytes(mutate(valid, rng))
        argv = ["import", fmt, str(path), "--campaign", str(campaign), *options]
        code, err = run_main(argv, capsys)
        check_outcome(code, err, before, campaign, argv)
        outcomes[code] += 1
        if code == 0:
            restore(campaign, before)
        shutil.rmtree(path.parent)
    assert outcomes[2] >= count // 10, outcomes  # the mutations do reach the refusals


def test_spec_fuzz_through_main(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tmp_path = work
    spec = tmp_path / "spec.toml"
    spec.write_text(FLEET_SPEC)
    code, err = run_main(["campaign", "submit", "--dry-run", str(spec)], capsys)
    assert code == 0, err
    spec.unlink()
    before = snapshot(tmp_path)
    rng = random.Random("spec-fuzz")
    outcomes = {0: 0, 2: 0, 130: 0}
    for _ in range(MUTATIONS):
        data = mutate(FLEET_SPEC, rng)
        if SPEC_DIRECTORY_LINE.encode() not in data:  # keep the campaign where the test can look
            data = SPEC_DIRECTORY_LINE.encode() + b"\n" + data
            with contextlib.suppress(ValueError):
                data.decode()
        spec.write_bytes(data)
        argv = ["campaign", "submit", "--dry-run", str(spec)]
        code, err = run_main(argv, capsys)
        spec.unlink()
        check_outcome(code, err, before, tmp_path, argv)
        outcomes[code] += 1
        if code == 0:
            restore(tmp_path, before)
    assert outcomes[2] >= MUTATIONS // 10, outcomes


@pytest.mark.parametrize(
    ("argv", "name", "data", "words"),
    [(["import", "hpl", "--node", "n1", "--campaign"], "xhpl.out", None, "73: scaled residual"),
     (["campaign", "submit", "--dry-run"], "spec.toml", FLEET_SPEC.encode().replace(b'"fleet"', b'"fl\xed"'),
      "3: not UTF-8")],
    ids=["hpl residual 4.123--5678e-03", "spec not UTF-8"],
)  # fmt: skip
def test_what_the_fuzzer_found(
    argv: list[str], name: str, data: bytes | None, words: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = work / name
    if data is None:
        text = (FIXTURES / "xhpl-2.3-three-runs.out").read_text()
        path.write_text(text.replace("4.12345678e-03", "4.123--5678e-03"))
    else:
        path.write_bytes(data)
    argv = [*argv, str(work / "c"), str(path)] if argv[0] == "import" else [*argv, str(path)]
    code, err = run_main(argv, capsys)
    assert code == 2 and err.startswith(f"tailscope: error: {path}:{words}") and err.count("\n") == 1, err
    assert not (work / "c").exists() and not (work / "campaigns").exists()
