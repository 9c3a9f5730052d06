"""`tailscope --help`, `--version`, `probes` and argument errors load nothing heavy (issue 11).

Each case runs in a fresh interpreter (the test process has numpy and friends loaded already) and reports
which of the heavy libraries ended up in sys.modules. A heavy import at the top of cli.py, or of any module
it imports, makes these fail; the verbs that need them import them when they run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from installed import tailscope_env

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


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["report"], 2),  # missing DIR and -o
        (["report", "--help"], 0),
        (["validate", "--help"], 0),
        (["inject", "--help"], 0),
        (["campaign", "--help"], 0),
        (["verdict", "--help"], 0),
        (["trace", "--help"], 0),
        (["check", "--page", "5k"], 2),
    ],
)
def test_more_verbs_load_nothing_heavy(argv: list[str], code: int) -> None:
    got, heavy, output = _loaded(*argv)
    assert got == code, output
    assert heavy == [], f"tailscope {' '.join(argv)} loaded {heavy}"


def _sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _verb_help(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help for a in action._choices_actions}


def test_lazy_parser_is_the_full_one() -> None:
    # The top level lists each verb from cli.VERBS, and a named verb's parser is built alone: both must be
    # what the whole parser (every builder run) gives, help line for help line.
    from tailscope import cli

    full = cli.build_parser()
    assert list(_sub_parsers(full)) == list(cli.VERBS)
    assert _verb_help(full) == cli.VERBS
    bare = cli.build_parser(verb="")
    assert bare.format_help() == full.format_help()
    for verb in cli.VERBS:
        lazy = cli.build_parser(verb=verb)
        assert _sub_parsers(lazy)[verb].format_help() == _sub_parsers(full)[verb].format_help(), verb
        assert lazy.format_help() == full.format_help()
    # the control: a verb not named is a name and help only (no options)
    assert _sub_parsers(bare)["analyze"].format_help() != _sub_parsers(full)["analyze"].format_help()


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze"],
        ["analyze", "x", "--threshold", "2"],
        ["run", "l2sum", "--trials", "x"],
        ["run", "l2sum", "--trials", "0"],
        ["report", "x"],
        ["no-such-verb"],
        ["addr"],
        ["validate", "--block", "0"],
    ],
)
def test_errors_are_the_full_parsers(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # The same one-line error and exit 2 as the parser with every verb built.
    from tailscope import cli

    with pytest.raises(SystemExit) as full_exit:
        cli.build_parser(cli._probe_named(argv)).parse_args(argv)
    full_err = capsys.readouterr().err
    code = None
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code
    lazy_err = capsys.readouterr().err
    assert full_exit.value.code == 2 and code == 2
    assert lazy_err == full_err
    assert ": error: " in lazy_err.splitlines()[-1]  # usage, then the one error line


def _small_campaign(root: Path) -> None:
    import datetime as dt

    import pyarrow as pa

    from tailscope.store.campaign import Campaign
    from tailscope.store.load import load_into
    from tailscope.store.schema import TABLES

    c = Campaign.create(root)
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    rows = [
        {"run_id": f"r{n}-{t}", "campaign": c.campaign_id, "node": f"n{n}", "probe": "l2sum",
         "variant": "l2sum-x", "params": "{}", "trial": t, "started_at": start + dt.timedelta(seconds=t),
         "metric": "bandwidth", "value": 100.0 - (15.0 if (n, t) == (1, 3) else 0.0) + 0.01 * t,
         "unit": "GB/s", "higher_is_better": True, "status": "ok", "source": "probe", "task": "t"}
        for n in range(4)
        for t in range(12)
    ]  # fmt: skip
    with load_into(root, "test") as load:
        load.write("runs", pa.Table.from_pylist(rows, schema=TABLES["runs"].schema), node="n")


@pytest.mark.parametrize("verb", [["analyze", "--json"], ["analyze"], ["report", "-o", "REPORT"]])
def test_the_command_ends_with_its_output_and_code(tmp_path: Path, verb: list[str]) -> None:
    # Read-only verbs end without the interpreter's teardown (cli.entry): the output must still be whole
    # and the exit code the verb's, as main() gives them in this process.
    from tailscope.cli import main

    root = tmp_path / "c"
    _small_campaign(root)
    argv = [verb[0], str(root), *[str(tmp_path / "r.html") if a == "REPORT" else a for a in verb[1:]]]
    out = tmp_path / "out.txt"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    env.pop("PYTHONUNBUFFERED", None)  # a block-buffered stdout: what a flush must not lose
    with out.open("wb") as fh:
        proc = subprocess.run([sys.executable, "-m", "tailscope", *argv], stdout=fh, env=env, timeout=300)
    code = main(argv)
    assert proc.returncode == code and code in (0, 1, 3)
    text = out.read_text()
    if "--json" in verb:
        assert json.loads(text)["campaign"]
    else:
        assert text.endswith("\n") and len(text) > 20


def test_a_probe_option_of_the_wrong_type_says_what_it_expects() -> None:
    code, heavy, out = _loaded("run", "hpl", "--n", "abc", "--trials", "2")
    assert code == 2 and not heavy
    assert "--n abc: expected a whole number" in out and "Traceback" not in out


def _perfcounts_text(samples: int) -> str:
    header = "TSC_ratio = 21\nReference_TSC = 25370245177304324\nReference_WallTime = 1532379481.075971\n"
    return header + "".join(
        f"tsc[{s}] = {25370245187777968 + s * 2_100_000_000}\n"
        f'core_counts[0]["L2_RQSTS.MISS"][{s}] = {1000 + 7 * s}\n'
        f'cha_counts[1][3]["UNC_CHA_TOR_INSERTS.IA_MISS_DRD_LOCAL"][{s}] = {5000 + 11 * s}\n'
        f"pkg_therm_status[0][{s}] = 0x8839080{s}\n"
        f"ib_recv_bytes[{s}] = {10**9 + s}\n"  # an array the importer does not know: stored as it is
        for s in range(samples)
    )


MODULES = 'sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)'
PROBE_MODULES = PROBE.replace('"heavy": heavy}', f'"heavy": heavy, "modules": {MODULES}}}')


def test_import_perfcounts_loads_pyarrow_alone(tmp_path: Path) -> None:
    # `import perfcounts` stores through the one load path with numpy and pyarrow only: no pandas (0.4 s),
    # DuckDB, pyarrow.dataset (which loads pandas) or pyarrow.compute, whether the campaign is new, already
    # holds another node's samples (the duplicate count reads them), or refuses a node's samples twice.
    from tailscope.importers import perfcounts

    if perfcounts._perfscan() is None:
        pytest.skip("native scanner not built (the pyarrow reader is the fallback)")
    campaign = str(tmp_path / "c")
    files = {}
    for node, samples in (("n1", 4), ("n2", 6)):
        files[node] = tmp_path / f"{node}.perfcounts.lua"
        files[node].write_text(_perfcounts_text(samples))
    # the tailscope this test imported and found the scanner of: from src it has no native library unless
    # $TAILSCOPE_NATIVE_LIB_DIR names one, and falls back to the pyarrow reader (which loads pandas)
    env = tailscope_env()
    for node, extra, code, said in [
        ("n1", [], 0, "imported 4 samples (16 values, 5 series) of node n1"),  # a new campaign
        ("n2", [], 0, "imported 6 samples (24 values, 5 series) of node n2"),  # into one that exists
        ("n2", ["--node", "n1"], 2, "already holds 16 samples of node n1"),  # refused: n1 is stored
    ]:
        argv = ["import", "perfcounts", str(files[node]), "--campaign", campaign, *extra]
        proc = subprocess.run(
            [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{PROBE_MODULES}", *argv],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        report = json.loads(next(x for x in proc.stderr.splitlines() if x.startswith("LOADED "))[7:])
        assert report["code"] == code and said in proc.stdout + proc.stderr, proc.stdout + proc.stderr
        assert report["heavy"] == ["numpy", "pyarrow"], argv
        assert not {"pyarrow.dataset", "pyarrow.compute", "pyarrow.csv"} & set(report["modules"]), argv


GC_PROBE = """
import gc, json, os, sys
from tailscope import cli
end = os._exit
def report(code):
    state = {"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}
    sys.__stderr__.write("\\nGC " + json.dumps(state) + "\\n")
    sys.__stderr__.flush()
    end(code)
os._exit = report
sys.argv = ["tailscope", *sys.argv[1:]]
cli.entry()
"""


def test_one_shot_read_only_command_turns_the_collector_off_main_in_process_does_not(tmp_path: Path) -> None:
    """one_shot_gc (verbs/oneshot.py): the `tailscope analyze` process turns the cyclic GC off and freezes
    its imported modules out of any explicit collection; `main` called in this process leaves both alone."""
    import gc

    from tailscope.cli import main

    root = tmp_path / "c"
    _small_campaign(root)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", GC_PROBE, "analyze", str(root), "--json"],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    line = next(x for x in proc.stderr.splitlines() if x.startswith("GC "))
    state = json.loads(line.removeprefix("GC "))
    assert state["code"] in (0, 1, 3) and json.loads(proc.stdout)["campaign"], proc.stderr
    assert not state["enabled"] and state["frozen"] > 10_000  # pandas, pyarrow and numpy's objects, at least
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    assert main(["analyze", str(root), "--json"]) in (0, 1, 3)
    assert (gc.isenabled(), gc.get_freeze_count()) == (enabled, frozen) and enabled


def test_the_version_is_read_from_the_dist_info_name_without_importlib_metadata(tmp_path: Path) -> None:
    # a copy of the package beside a dist-info of a made-up version: the lookup must find that one, and
    # never import importlib.metadata (20 ms of a cold `tailscope import`)
    import shutil

    site = tmp_path / "site"
    shutil.copytree(
        SRC / "tailscope", site / "tailscope", ignore=shutil.ignore_patterns("__pycache__", "_native")
    )
    (site / "tailscope-7.8.9.dist-info").mkdir()
    code = "import sys, tailscope; print(tailscope.__version__, 'importlib.metadata' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(site)),
    )
    assert out.stdout.split() == ["7.8.9", "False"], out.stderr
    # two dist-infos (a broken install): importlib.metadata decides (the installed tailscope, or none)
    (site / "tailscope-7.9.0.dist-info").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(site)),
    )
    version, metadata = out.stdout.split()
    assert metadata == "True" and version not in ("7.8.9", "7.9.0")
