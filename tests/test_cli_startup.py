"""`tailscope --help`, `--version`, `probes` and argument errors load nothing heavy (issue 11).

Each case runs in a fresh interpreter (the test process has numpy and friends loaded already) and reports
which of the heavy libraries ended up in sys.modules. A heavy import at the top of cli.py, or of any module
it imports, makes these fail; the verbs that need them import them when they run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numpy", "pandas", "pyarrow", "duckdb", "scipy", "orjson")
SRC = Path(__file__).resolve().parents[1] / "src"

PROBE = """
import json, sys
from tailscope.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
sys.__stderr__.write("\\nLOADED " + json.dumps({"code": code, "heavy": heavy}) + "\\n")
"""


def _loaded(*argv: str) -> tuple[int, list[str], str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{PROBE}", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LOADED "))
    report = json.loads(line.removeprefix("LOADED "))
    return report["code"], report["heavy"], proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["--help"], 0),
        (["--version"], 0),
        (["probes"], 0),
        (["analyze", "--help"], 0),
        (["addr", "map", "--help"], 0),
        (["monitor", "--help"], 0),
        (["analyze"], 2),  # missing DIR: an argument error
        (["run", "l2sum", "--trials", "x"], 2),
        (["no-such-verb"], 2),
    ],
)
def test_no_heavy_import(argv: list[str], code: int) -> None:
    got, heavy, output = _loaded(*argv)
    assert got == code, output
    assert heavy == [], f"tailscope {' '.join(argv)} loaded {heavy}"


def test_a_verb_that_needs_them_still_loads_them(tmp_path: Path) -> None:
    # The control: the probe above does see heavy imports when a verb really uses the store.
    got, heavy, output = _loaded("analyze", str(tmp_path / "none"))
    assert got == 2, output
    assert "tailscope: error:" in output and "campaign" in output
    assert "pyarrow" in heavy


def test_version_is_the_installed_one() -> None:
    got, _, output = _loaded("--version")
    assert got == 0
    assert output.startswith("tailscope ")
    assert output.split()[1][0].isdigit()
