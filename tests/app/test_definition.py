"""The application definition file: `check --app FILE` and the Slurm spec's [[apps]] (a spec may have no
[[probes]]); errors name the file, the key's line and what was expected."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from store_tools import stored
from tailscope.app.definition import load_definition
from tailscope.app.variant import AppInputError
from tailscope.campaign.spec import SpecError, load_spec
from tailscope.cli import main

APP = f"""
name = "widgets"
argv = ["{sys.executable}", "-c", "import os; print('value', 40 + int(os.environ['TAILSCOPE_TRIAL']))"]
trials = 3
metrics = ["v:widgets=value (\\\\d+)"]
sanity = "value"
reference = "41:-10,+10"
env = {{ OMP_NUM_THREADS = "1", OMP_PLACES = "{{0:4}},{{4:4}}" }}
warmup = 1
timeout = 60
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_definition_becomes_the_same_variant_as_the_command_line(tmp_path, capsys):
    variant, trials = load_definition(write(tmp_path / "app.toml", APP))
    assert trials == 3 and variant.probe == "app:widgets"
    assert variant.env == {"OMP_NUM_THREADS": "1", "OMP_PLACES": "{0:4},{4:4}"}
    assert variant.params["metrics"] == ["v:widgets=value (\\d+)"] and variant.params["warmup"] == 1
    assert variant.spec.timeout_s == 60 and variant.spec.unit == "widgets"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('argv = "ls"\n', ":1: argv: expected the command as a list of words"),
        ('argv = ["ls"]\ntrials = 0\n', ":2: trials: expected a whole number from 1 to 1,000,000"),
        # the command line's bounds (options.SHARED), which a definition once escaped (issue 30)
        ('argv = ["ls"]\ntrials = 1000001\n', ":2: trials: expected a whole number from 1 to 1,000,000"),
        ('argv = ["ls"]\ntrials = 1000000000000000000\n', ":2: trials: expected a whole number from 1"),
        ('argv = ["ls"]\ntimeout = inf\n', ":2: timeout: expected seconds, a finite number > 0 and <= 6048"),
        ('argv = ["ls"]\ntimeout = nan\n', ":2: timeout: expected seconds, a finite number > 0"),
        ('argv = ["ls"]\ntimeout = 604801\n', ":2: timeout: expected seconds"),
        ('argv = ["ls"]\nwarmup = 1001\n', ":2: warmup: expected a whole number from 0 to 1,000"),
        ('argv = ["ls"]\nmetric_file = "/etc/shadow"\n', ":2: metric_file: --metric-file /etc/shadow"),
        ('argv = ["ls"]\nmetrics = ["x=(a)\\\\1"]\n', ":2: metrics: --metric 'x=(a)\\\\1': not a valid"),
        ('argv = ["ls"]\nbogus = 1\n', ":2: bogus: unknown key"),
        ('argv = ["ls"]\n\nmetrics = ["x=(a"]\n', ":3: metrics: --metric 'x=(a'"),
        ('argv = ["ls"]\nsanity = "[z"\n', ":2: sanity: --sanity '[z': not a valid regular expression"),
        ('argv = ["ls"]\nreference = "x"\n', ":2: reference: --reference 'x'"),
        ('argv = ["ls"]\nenv = { "1A" = "x" }\n', ":2: env: 1A: expected NAME"),
        ('argv = ["ls"\n', ": not valid TOML"),
        ('argv = ["ls"]\nname = "a b"\n', ":2: name: expected a word"),
        ('argv = ["ls"]\nwarmup = true\n', ":2: warmup: expected a whole number from 0 to 1,000"),
        ('argv = ["ls"]\n\n[env]\n"A-B" = "1"\n', ":3: env: A-B: expected NAME"),  # the table's header
    ],
)
def test_bad_definitions_name_file_and_line(tmp_path, text, where):
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(AppInputError) as exc:
        load_definition(path)
    assert str(exc.value).startswith(str(path)) and where in str(exc.value), str(exc.value)


def test_definition_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'argv = ["ls"]\nname = "caf\xe9"\n')
    with pytest.raises(AppInputError) as exc:
        load_definition(path)
    assert str(exc.value) == f"{path}:2: not UTF-8 text (byte 25); TOML files are UTF-8"


def test_a_number_past_pythons_digit_limit_is_one_line(tmp_path, capsys):
    """tomllib converts a TOML integer with int(): past Python's 4300-digit limit that is a ValueError, not a
    TOMLDecodeError, and it reached the user as a traceback."""
    path = write(tmp_path / "huge.toml", 'argv = ["ls"]\ntrials = ' + "9" * 5000 + "\n")
    with pytest.raises(AppInputError) as exc:
        load_definition(path)
    assert str(exc.value).startswith(f"{path}: not a TOML file tailscope can read (")
    campaign = tmp_path / "c"
    assert main(["check", "--quick", "--app", str(path), "--campaign", str(campaign), "--no-progress"]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not campaign.exists()


def test_check_app_file_refuses_bad_definition_before_running(tmp_path, capsys):
    bad = write(tmp_path / "bad.toml", 'argv = ["ls"]\ntrials = -1\n')
    campaign = tmp_path / "c"
    assert main(["check", "--quick", "--app", str(bad), "--campaign", str(campaign), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: trials" in err and err.count("\n") == 1
    assert not campaign.exists()


SPEC = """
[campaign]
directory = "fleet"

[slurm]
nodes = "n[1-2]"

[[apps]]
file = "app.toml"
trials = 2

[[apps]]
name = "inline"
argv = ["{python}", "-c", "print('rate 7')"]
metrics = ["r:ops/s=rate (\\\\d+)"]
trials = 1
"""


def test_spec_with_apps_and_no_probes_runs_through_resume(tmp_path, capsys):
    """A fleet runs the site's application: the spec's [[apps]] become the campaign's plans, and a node's
    step (`run --resume --campaign DIR`, what step.sh runs) runs them through the local runner."""
    from tailscope.campaign.slurm import prepare, step_script

    write(tmp_path / "app.toml", APP)
    spec = load_spec(write(tmp_path / "spec.toml", SPEC.format(python=sys.executable)))
    assert [(e.variant.probe, e.trials) for e in spec.probes] == [("app:widgets", 2), ("app:inline", 1)]
    campaign = prepare(spec)
    assert "run --resume --campaign" in step_script(spec, campaign.root)
    assert main(["run", "--resume", "--campaign", str(campaign.root), "--node", "n1", "--no-progress"]) == 0
    rows = stored(campaign.root, "SELECT probe, trial, value, unit FROM runs ORDER BY probe, trial")
    assert rows == [
        ("app:inline", 0, 7.0, "ops/s"),
        ("app:widgets", 0, 40.0, "widgets"),
        ("app:widgets", 1, 41.0, "widgets"),
    ]


@pytest.mark.parametrize(
    ("apps", "where"),
    [
        ('[[apps]]\nfile = "missing.toml"\n', "cannot read the application definition"),
        ('[[apps]]\nfile = "app.toml"\nname = "x"\n', "an [[apps]] entry with file takes only trials"),
        ('[[apps]]\nargv = ["ls"]\n', "apps.trials: expected the trials per node"),
        ('[[apps]]\nargv = ["ls"]\ntrials = 1\nsanity = "(("\n', "apps.sanity: --sanity"),
    ],
)
def test_bad_apps_entries(tmp_path, apps, where):
    write(tmp_path / "app.toml", APP)
    text = SPEC.split("[[apps]]")[0] + apps
    with pytest.raises((SpecError, AppInputError)) as exc:
        load_spec(write(tmp_path / "spec.toml", text))
    assert where in str(exc.value)


@pytest.mark.slow
def test_check_app_shows_the_application_in_its_one_screen(tmp_path, capsys):
    app = write(tmp_path / "app.toml", APP)
    campaign = tmp_path / "c"
    code = main(
        [
            "check",
            "--quick",
            "--trials",
            "2",
            "--app",
            str(app),
            "--campaign",
            str(campaign),
            "--no-progress",
            "--max-busy-share",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code in (0, 1, 3)
    line = next(line for line in out.splitlines() if line.strip().startswith("app:widgets"))
    assert "widgets" in line and "n=2" in line
    assert (campaign / "report.html").exists()
