"""`tailscope jobs show` as a user runs it: the sentence of the issue, the --json keys exactly, the verdict's
exit codes (0 healthy, 1 degraded, 3 inconclusive), the epilog's evidence counted per job, user strings
(job names, users) escaped on the terminal, and the Prometheus textfile."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path

from tailscope.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from fleet import make_fleet, write_sacct

SENTENCE = re.compile(
    r"^(?P<node>\S+): jobs that ran on it were (?P<pct>\d+\.\d)% slower "
    r"\[(?P<lo>-?\d+\.\d), (?P<hi>-?\d+\.\d)\] "
    r"than the same classes elsewhere \((?P<jobs>\d+) jobs, (?P<classes>\d+) classes, q (=|<) [0-9.e-]+\) "
    r"since (at least )?\d{4}-\d{2}-\d{2}.*; epilog: thermal throttling in (?P<hot>\d+) of (?P<of>\d+)"
)


def unwrapped(text: str) -> list[str]:
    """The answer's lines as written before wrapping (a continuation line is indented by 4 or more)."""
    out: list[str] = []
    for line in text.splitlines():
        if out and line.startswith("    "):
            out[-1] += " " + line.strip()
        else:
            out.append(line)
    return out


def test_the_sentence_names_the_slow_node_with_its_interval_and_the_epilog_evidence(history, capsys):
    root, slow, _, _ = history
    assert main(["jobs", "show", str(root)]) == 1  # 12% is beyond the default 5% slow threshold
    text = capsys.readouterr().out
    lines = unwrapped(text)
    matches = [SENTENCE.match(line.strip()) for line in lines]
    found = [m for m in matches if m]
    assert len(found) == 1, lines
    m = found[0]
    assert m["node"] == slow and float(m["lo"]) < 12.0 < float(m["hi"]) + 2.0
    assert int(m["hot"]) <= int(m["of"]) <= int(m["jobs"])
    assert lines[0] == f"verdict: DEGRADED (1 node makes its jobs more than 5% slower: {slow})"  # first
    assert re.search(r"; not timed: \d+ failed, .*\d+ cancelled", lines[1]), lines[1]  # the most first
    assert [line for line in lines if line.startswith("terms: ")] == [lines[-1]]  # explained once, last
    assert len(text.splitlines()) <= 24  # one screen, wrapped at 100 columns


def test_json_has_exactly_the_issues_keys(history, capsys):
    root, slow, hot, _ = history
    assert main(["jobs", "show", str(root), "--json"]) == 1
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"nodes", "classes", "verdict"} and body["verdict"] == "degraded"
    for n in body["nodes"]:
        assert set(n) == {
            "node", "effect", "effect_ci", "jobs", "classes", "q", "since", "since_at_least", "evidence"
        }  # fmt: skip
        assert set(n["effect_ci"]) == {"lower", "upper"}
        is_slow = n["q"] < 0.05 and n["effect_ci"]["lower"] > 0
        assert (n["since"] is not None) == is_slow and (n["evidence"] is not None) == is_slow  # counted: slow
    for c in body["classes"]:
        assert set(c) == {"class", "jobs", "median_elapsed_s", "basis"} and c["jobs"] >= 10
    first = body["nodes"][0]
    assert first["node"] == slow and first["q"] < 0.05
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", first["since"]) and isinstance(first["since_at_least"], bool)
    assert first["evidence"] == [
        {"what": "thermal throttling", "jobs": hot, "of": hot + (first["jobs"] - hot)}
    ] or (first["evidence"][0]["what"] == "thermal throttling" and first["evidence"][0]["jobs"] <= hot)
    assert all(e["what"] != "machine-check events" for e in first["evidence"])  # `.total`: not during the job
    assert [n for n in body["nodes"][1:] if n["q"] < 0.05 and n["effect"] > 0] == []


def test_exit_codes_follow_the_verdict(history, tmp_path, capsys):
    root, slow, _, _ = history
    assert main(["jobs", "show", str(root), "--threshold", "0.2"]) == 0  # 12% is within a 20% threshold
    first = capsys.readouterr().out.splitlines()[0]
    assert first == "verdict: HEALTHY (1 node makes its jobs slower, within the 20% allowed)"
    assert main(["jobs", "show", str(root), "--node", "c01", "--json"]) == 0
    capsys.readouterr()
    assert main(["jobs", "show", str(root), "--node", slow]) == 1
    assert unwrapped(capsys.readouterr().out)[0].startswith(f"verdict: DEGRADED ({slow} makes its jobs 1")
    assert main(["jobs", "show", str(root), "--node", "nosuchnode"]) == 3
    assert (
        capsys.readouterr().out.splitlines()[0]
        == "verdict: INCONCLUSIVE (no timed job ran on nosuchnode here)"
    )
    few = tmp_path / "few"
    fleet = make_fleet(nodes=4, jobs=8, days=2, classes=2, seed=1)
    assert (
        main(["jobs", "collect", str(few), "--sacct-file", str(write_sacct(fleet.rows, tmp_path / "s"))]) == 0
    )
    capsys.readouterr()
    assert main(["jobs", "show", str(few)]) == 3
    out = capsys.readouterr().out
    assert (
        out.splitlines()[0] == "verdict: INCONCLUSIVE (no class has 10 completed jobs yet: nothing to judge)"
    )
    assert "a class is the jobs of one user" in out
    assert main(["jobs", "show", str(root), "--class-by", "user,colour"]) == 2
    assert "--class-by 'user,colour': expected a comma list of user, name" in capsys.readouterr().err


def test_user_strings_are_escaped_on_the_terminal(history, capsys):
    root, _, _, evil = history
    assert main(["jobs", "show", str(root), "--node", evil]) in (0, 1)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b[2Jname" in out or "mallory\\x07" in out


def test_prometheus_textfile(history, tmp_path, capsys):
    root, slow, _, _ = history
    prom = tmp_path / "prom" / "jobs.prom"
    assert main(["jobs", "show", str(root), "--json", "--prometheus", str(prom)]) == 1
    text = prom.read_text()
    assert f'tailscope_jobs_node_degraded{{node="{slow}"}} 1' in text
    assert 'tailscope_jobs_node_degraded{node="c01"} 0' in text
    assert re.search(rf'tailscope_jobs_node_effect{{node="{slow}"}} 0\.1', text)


def test_since_selects_jobs(history, capsys):
    root = history[0]
    late = (dt.datetime(2026, 9, 7, tzinfo=dt.UTC) + dt.timedelta(days=19)).strftime("%Y-%m-%d")
    assert main(["jobs", "show", str(root), "--since", late, "--json"]) in (0, 1, 3)
    body = json.loads(capsys.readouterr().out)
    assert sum(c["jobs"] for c in body["classes"]) < 200
