"""The analysis' (and the report's runs CSV's) fast paths give what the plain code gives (issue 11).

Each fast path is compared with a reference written the plain way, in this file, on the recorded-format
evidence of evidence_fixtures.py: several nodes and variants, flagged runs with and without evidence.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import math
import types
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from evidence_fixtures import Ensemble, Trial, analyze_ensemble, ensemble

from tailscope.analysis import causes
from tailscope.analysis.causes import RunContext, diagnose
from tailscope.analysis.causes.context import (
    add_corunner_share,
    corunner_lists,
    features_of,
    run_features,
    usual_features,
    usual_features_by_group,
)
from tailscope.analysis.model import Settings
from tailscope.analysis.run_columns import COLUMNS, PER_RUN, RunVerdicts
from tailscope.analysis.summary import score_runs
from tailscope.probes.catalogue import variant_name
from tailscope.report.answer import run_cause
from tailscope.verbs.workflow import runs_csv


def _fleet() -> Ensemble:
    """Three nodes x two probes; slow trials with co-runners, with reclaim, with iterations only."""
    parts = []
    for i, node in enumerate(("n1", "n2", "n3")):
        for probe in ("l2sum", "stream"):
            slow = {
                3: Trial(slowdown=0.2, others=0.2, corunners=((77, "hog", 0.2),)),
                9: Trial(slowdown=0.12, vm={"pgscan_direct": 5000.0, "allocstall_normal": 40.0}),
                17: Trial(slowdown=0.3, iteration_slow={2: 0.9}),
            }
            parts.append(ensemble(slow, n=24, node=node, probe=probe, seed=3 + i, with_evidence=node != "n3"))
    return Ensemble(*(pd.concat([getattr(p, f) for p in parts], ignore_index=True) for f in
                      ("runs", "iterations", "counters", "corunners", "nodes")))  # fmt: skip


def _reference_diagnose(scored: pd.DataFrame, e: Ensemble) -> dict[str, tuple]:
    """The catalogue's diagnosis the plain way: one pandas frame per (variant, node) group."""
    features, cpus = run_features(e.counters)
    co = corunner_lists(e.corunners)
    features = add_corunner_share(features, co)
    facts = causes.node_facts(e.nodes)
    out = {}
    for (variant, node), g in scored.groupby(["variant", "node"], sort=False):
        mine = g.loc[g["flagged"]]
        if mine.empty:
            continue
        usual = usual_features(features, g.loc[~g["flagged"], "run_id"].astype(str).tolist())
        for row in mine.itertuples(index=False):
            run_id = str(row.run_id)
            has_os = run_id in features.index and bool(features.loc[run_id].notna().any())
            ctx = RunContext(
                run_id=run_id, node=str(node), probe=str(row.probe), variant=str(variant),
                trial=int(row.trial),
                slowdown=float(row.slowdown), kind="unclassified", kind_evidence=None,
                has_evidence=run_id in cpus or has_os, now=features_of(features, run_id), usual=usual,
                cpus=cpus.get(run_id, ()), corunners=co.get(run_id, ()), facts=facts.get(str(node), {}),
                params=causes._params(row.params),
            )  # fmt: skip
            out[run_id] = diagnose(ctx)
    return out


def test_diagnose_runs_is_the_per_group_diagnosis() -> None:
    e = _fleet()
    scored = score_runs(e.runs.sort_values(["variant", "node", "trial"], ignore_index=True), Settings())
    found = causes.diagnose_runs(scored, {}, counters=e.counters, corunners=e.corunners, nodes=e.nodes)
    expected = _reference_diagnose(scored, e)
    assert len(expected) >= 12  # the control: slow runs on every node and probe were flagged
    assert list(found) == list(expected)
    assert found == expected
    names = {f.cause for fs in found.values() for f in fs}
    assert {"cpu-contention", "unknown"} <= names  # evidence-backed and evidence-less runs both seen


def test_usual_features_by_group_is_usual_features_per_group() -> None:
    rng = np.random.default_rng(5)
    ids = [f"r{i}" for i in range(60)]
    index = pd.Index(ids, name="run_id")
    features = pd.DataFrame(rng.normal(size=(60, 4)), index=index, columns=list("abcd"))
    features.loc[features.sample(frac=0.3, random_state=1).index, "b"] = np.nan
    features.loc[ids[:20], "c"] = np.nan  # group 0: c never known
    normal_ids = [*ids[:20], *ids[20:45], "not-in-features", "nor-this"]
    group = np.array([0] * 20 + [1] * 25 + [1, 2])
    got = usual_features_by_group(features, normal_ids, group)
    for g in (0, 1):
        members = [r for r, k in zip(normal_ids, group, strict=True) if k == g]
        assert got[g] == pytest.approx(usual_features(features, members), rel=0, abs=0)
        assert set(got[g]) == set(usual_features(features, members))
    assert "c" not in got[0] and "c" in got[1]
    assert 2 not in got  # a group whose runs have no features has no usual values


def _pandas_runs_csv(analysis) -> str:
    """The former implementation: a frame of one dict per run, written by pandas."""
    names = {v.variant: variant_name(v.probe, dict(v.params)) for v in analysis.variants}
    rows = [
        {
            "run_id": r.run_id,
            "node": r.node,
            "probe": r.probe,
            "variant": names.get(r.variant, r.variant),
            "variant_id": r.variant,
            "trial": r.trial,
            "started_at": r.started_at,
            "value": r.value,
            "unit": r.unit,
            "perf_ratio": r.perf_ratio,
            "scaled_value": r.scaled_value,
            "slow": r.slow,
            "flagged": r.flagged,
            "kind": r.kind,
            "cause": run_cause(r),
            "cause_confidence": r.causes[0].confidence if r.causes else "",
        }
        for r in sorted(analysis.runs, key=lambda r: (r.perf_ratio, r.node, r.trial))
    ]
    return pd.DataFrame(rows).to_csv(index=False)


def test_runs_csv_reads_back_as_what_pandas_wrote() -> None:
    slow = {5: Trial(slowdown=0.2, others=0.2, corunners=((9, "hog", 0.2),)), 11: Trial(slowdown=0.15)}
    analysis = analyze_ensemble(ensemble(slow, n=30))
    runs = list(analysis.runs)
    # awkward values too: a comma and a quote in a unit, a NaN, a huge and a tiny number
    runs[0] = dataclasses.replace(runs[0], unit='GB/s, "per node"', scaled_value=math.nan)
    runs[1] = dataclasses.replace(runs[1], value=1e300, scaled_value=1e-7)
    # ties in the sort key: the same ratio on two nodes (node decides), then on one node (trial decides)
    for i, node in ((2, "n2"), (3, "n0"), (4, "n2"), (5, "n1")):
        runs[i] = dataclasses.replace(runs[i], perf_ratio=0.9, node=node)
    analysis = dataclasses.replace(analysis, runs=tuple(runs))
    got = runs_csv(analysis).decode()
    # the same table as pandas wrote, read back (numbers are Arrow's shortest round-trip text: 1e+300, 1e-7)
    frame = pd.read_csv(io.StringIO(got))
    pd.testing.assert_frame_equal(
        frame, pd.read_csv(io.StringIO(_pandas_runs_csv(analysis))), check_exact=True
    )
    # plain text unquoted, the awkward unit quoted as the csv module quotes it, NaN empty; one line per run
    lines = got.splitlines()
    assert lines[0] == ",".join(frame.columns) and len(lines) == 31
    odd = next(line for line in lines if line.startswith(runs[0].run_id + ","))
    assert ',"GB/s, ""per node""",' in odd
    row = next(csv.reader([odd]))
    assert row[8] == 'GB/s, "per node"' and row[10] == ""  # unit; scaled_value NaN: empty
    assert "," not in lines[2] or '"' not in lines[2].split(",")[1]  # a node name is never quoted
    assert len(frame) == 30 and frame["flagged"].sum() >= 2  # the control: flagged runs with causes
    assert (frame["cause"] != "-").sum() == frame["flagged"].sum()


def _store_fleet(root) -> None:
    """_fleet's runs, iterations and evidence stored through the load path, one commit per node, plus a
    retried trial (a failed attempt that stays hidden)."""
    import pyarrow as pa

    from tailscope.store.campaign import Campaign, conform
    from tailscope.store.load import load_into
    from tailscope.store.schema import TABLES

    e = _fleet()
    Campaign.create(root)
    nodes = e.nodes.drop_duplicates("node").assign(
        collected_at=pd.Timestamp("2026-11-02T09:00:00", tz="UTC"), task="t1", facts="{}"
    )
    for node, runs in e.runs.groupby("node"):
        ids = set(runs["run_id"])
        retry = runs.iloc[[0]].assign(run_id=lambda f: f["run_id"] + "-failed", status="error", value=None)
        tables = {
            "runs": pd.concat([runs, retry], ignore_index=True),
            "iterations": e.iterations.loc[e.iterations["run_id"].isin(ids)],
            "counters": e.counters.loc[e.counters["run_id"].isin(ids)],
            "corunners": e.corunners.loc[e.corunners["run_id"].isin(ids)],
            "nodes": nodes.loc[nodes["node"] == node],
        }
        with load_into(root, "test") as load:
            for name, frame in tables.items():
                data = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
                data = data.select([c for c in data.column_names if c in TABLES[name].names])
                load.write(name, conform(data, name), node=str(node))


def test_analyze_campaign_is_analyze_of_every_row(tmp_path) -> None:
    """`analyze` (narrow runs read, only the iterations it needs) gives the JSON that the analysis of every
    stored row gives (the whole runs table and every iteration, as `analyze` read them before issue 11)."""
    from tailscope.analysis.cluster import cluster_settings_of
    from tailscope.analysis.summary import analyze
    from tailscope.jsonout import encode
    from tailscope.store.campaign import Campaign
    from tailscope.store.read import connect
    from tailscope.verbs import workflow

    root = tmp_path / "fleet"
    _store_fleet(root)
    campaign = Campaign.open(root)
    with connect(campaign) as con:
        runs, iterations = workflow.load_frames(campaign, con=con)
        assert len(iterations) > 0 and "task" in runs.columns  # every column, every iteration
        counters, corunners, nodes = workflow.load_evidence(con, runs["run_id"].astype(str).tolist())
        cluster = cluster_settings_of(campaign.manifest.cluster)
        every = analyze(
            runs, iterations, Settings(), campaign.campaign_id, cluster,
            counters=counters, corunners=corunners, nodes=nodes,
        )  # fmt: skip
        every = workflow.with_attribution(con, every, runs)
    fast = workflow.analyze_campaign(root, Settings())
    assert encode(fast) == encode(every)
    flagged = [r for r in fast.runs if r.flagged]
    assert len(flagged) >= 12 and "systematic" in {r.kind for r in flagged}  # the control: classified
    assert any(c.cause == "cpu-contention" for r in flagged for c in r.causes)


@pytest.mark.parametrize("chunk_items", [1, 7, 2000])
def test_analyze_json_written_in_chunks_is_the_one_encoding(tmp_path, chunk_items) -> None:
    """`analyze --json` writes the analysis field by field and its runs in chunks (issue 11: the peak
    memory of 1,000 nodes): byte for byte what one orjson encoding of the whole object gives."""
    import io

    from tailscope.jsonout import encode, encode_chunks, write_json
    from tailscope.verbs import workflow

    root = tmp_path / "fleet"
    _store_fleet(root)
    analysis = workflow.analyze_campaign(root, Settings())
    assert len(analysis.runs) > 7 and analysis.groups and analysis.nodes  # chunks of runs, nested fields
    whole = encode(analysis)
    pieces = list(encode_chunks(analysis, chunk_items=chunk_items))
    assert b"".join(pieces) == whole
    assert len(pieces) >= len(analysis.runs) // chunk_items  # really in pieces
    out = io.BytesIO()
    text = io.TextIOWrapper(out, encoding="utf-8")
    write_json(analysis, text)
    assert out.getvalue() == whole
    assert b"".join(encode_chunks({"a": [1, 2]})) == encode({"a": [1, 2]})  # not a dataclass: one piece


def test_by_ratio_is_sorted_by_ratio_node_trial() -> None:
    """The report's one ordering of runs (runs CSV, the sorted figure) is `sorted` by (ratio, node, trial)."""
    from tailscope.report.answer import by_ratio

    runs = list(analyze_ensemble(ensemble({3: Trial(slowdown=0.2)}, n=24)).runs)
    for i, (ratio, node) in enumerate([(0.9, "n2"), (0.9, "n0"), (0.9, "n2"), (0.9, "n1"), (1.1, "n0")]):
        runs[i] = dataclasses.replace(runs[i], perf_ratio=ratio, node=node)
    runs[6] = dataclasses.replace(runs[2])  # an exact tie: the earlier stays first
    want = sorted(range(len(runs)), key=lambda i: (runs[i].perf_ratio, runs[i].node, runs[i].trial))
    assert by_ratio(runs) == want and by_ratio([]) == []


def test_time_figure_order_is_sorted_by_start_then_trial() -> None:
    """The time figure's order of runs, by numpy, is `sorted` by (started_at text, trial), ties in order."""
    from tailscope.report.plotly_figures import _by_start

    runs = list(analyze_ensemble(ensemble({3: Trial(slowdown=0.2)}, n=24)).runs)
    starts = ["2026-11-02T10:05:00", "2026-11-02T10:01:00", "2026-11-02T10:05:00", "2026-11-02T09:59:59"]
    for i, start in enumerate(starts):
        runs[i] = dataclasses.replace(runs[i], started_at=start, trial=7 - i)
    runs[6] = dataclasses.replace(runs[2])  # an exact tie: the earlier stays first
    want = sorted(range(len(runs)), key=lambda i: (str(runs[i].started_at), runs[i].trial))
    assert _by_start(runs) == want and _by_start([]) == []


def test_the_evidence_features_are_derived_once_per_analysis(monkeypatch) -> None:
    """The causes and the busy verdict both read run_features(counters): the analysis derives them once
    (the pivot of every evidence row was a third of a check's analysis), and each gives with them what it
    gives deriving them itself."""
    from tailscope.analysis import health, summary

    e = _fleet()
    scored = score_runs(e.runs.sort_values(["variant", "node", "trial"], ignore_index=True), Settings())
    features = run_features(e.counters)
    given = {"counters": e.counters, "corunners": e.corunners, "nodes": e.nodes}
    assert causes.diagnose_runs(scored, {}, **given, features=features) == causes.diagnose_runs(
        scored, {}, **given
    )
    busy = health.busy_by_node(scored, e.counters, e.corunners, 0.1, features=features)
    assert busy and busy == health.busy_by_node(scored, e.counters, e.corunners, 0.1)
    calls = []

    def counted(counters):
        calls.append(len(counters))
        return run_features(counters)

    for module in (summary, health, causes):
        monkeypatch.setattr(module, "run_features", counted)
    analyze_ensemble(e)
    assert calls == [len(e.counters)]


def _former_pick_timelines(runs, per_node: int = 6, per_variant: int = 12) -> dict:
    """The timelines' selection the plain way (before issue 31): every run an object, walked twice."""
    slow_of = defaultdict(list)
    for run in runs:
        if run.slow:
            slow_of[run.variant].append(run)
    chosen = defaultdict(list)
    for variant in sorted(slow_of):
        taken = 0
        for run in sorted(slow_of[variant], key=lambda r: (r.perf_ratio, r.node, r.trial, r.run_id)):
            if taken >= per_variant:
                break
            if len(chosen[(run.variant, run.node)]) < per_node:
                chosen[(run.variant, run.node)].append(run)
                taken += 1
    picks = {}
    for key in sorted(k for k, v in chosen.items() if v):
        normal = [r for r in runs if not r.slow and (r.variant, r.node) == key]
        typical = min(normal, key=lambda r: (abs(r.perf_ratio - 1.0), r.trial, r.run_id), default=None)
        picks[key] = (typical, tuple(chosen[key]))
    return picks


def _held_by_column(runs) -> RunVerdicts:
    """`runs` as the analysis holds them: arrays and the per-run fields of the runs that have them, no
    RunVerdict object (RunVerdicts.of keeps the objects it is given)."""
    held = RunVerdicts.of(runs)
    extra: dict[int, dict] = defaultdict(dict)
    for name in PER_RUN:
        for row, value in held.per_run(name).items():
            extra[row][name] = value
    return RunVerdicts({name: held.column(name) for name in COLUMNS}, extra)


def _tied_runs(runs: list) -> list:
    """`runs` with ties in every ordering the report makes: slow runs of one ratio on two nodes (the node
    decides) and on one node (the trial decides), and two normal runs at the node median (the trial)."""
    slow = [i for i, r in enumerate(runs) if r.slow and r.variant == runs[0].variant]
    by_node = defaultdict(list)
    for i in slow:
        by_node[runs[i].node].append(i)
    first, second = [rows for _, rows in sorted(by_node.items())][:2]
    a, b = first[-1], second[0]  # b's trial is lower, its node's name higher: the node must decide
    for i in (first[0], a, b):
        runs[i] = dataclasses.replace(runs[i], perf_ratio=0.5)
    group = (runs[a].variant, runs[a].node)
    normal = [i for i, r in enumerate(runs) if not r.slow and (r.variant, r.node) == group]
    for i in normal[-2:]:  # two normal runs at the median: the earlier trial is the typical one
        runs[i] = dataclasses.replace(runs[i], perf_ratio=1.0)
    return runs


def test_report_by_column_is_the_report_of_the_run_objects(tmp_path, monkeypatch) -> None:
    """`report` reads the runs by column (issue 31: building 50,000 RunVerdicts was a tenth of it): the HTML
    and both CSVs are byte for byte those of the same runs held as objects, no run object is built for all
    runs, and the timelines' picks are those of the plain per-object selection, ties included."""
    import re

    from tailscope.report.timelines import pick_timelines
    from tailscope.verbs import workflow

    root = tmp_path / "fleet"
    _store_fleet(root)
    analysis = workflow.analyze_campaign(root, Settings())
    runs = _tied_runs(list(analysis.runs))
    objects = dataclasses.replace(analysis, runs=tuple(runs))
    columns = dataclasses.replace(analysis, runs=_held_by_column(runs))

    def every_run(self):
        raise AssertionError("the report built an object of every run")

    class Noon(datetime.datetime):  # one generated_at for both reports
        @classmethod
        def now(cls, tz=None):
            return datetime.datetime(2026, 11, 2, 12, 0, tzinfo=tz)

    monkeypatch.setattr(workflow, "dt", types.SimpleNamespace(datetime=Noon, UTC=datetime.UTC))
    monkeypatch.setattr(RunVerdicts, "__iter__", every_run)
    written = {}
    for name, held in (("objects", objects), ("columns", columns)):
        (tmp_path / name).mkdir()
        path = workflow.write_report(root, held, tmp_path / name / "r.html")
        written[name] = [
            path.read_text(),
            (tmp_path / name / "r-runs.csv").read_bytes(),
            (tmp_path / name / "r-nodes.csv").read_bytes(),
        ]
    assert written["columns"] == written["objects"]

    for per_variant in (2, 12):  # 2: which tied run is drawn depends on the order across nodes
        picks = pick_timelines(columns, per_variant=per_variant)
        former = _former_pick_timelines(runs, per_variant=per_variant)
        assert {k: (p.typical, p.slow) for k, p in picks.items()} == former
        assert pick_timelines(objects, per_variant=per_variant) == picks
    # the control: the ties are among the picks (two nodes and two trials at 0.5, typical at 1.0)
    tied = [r for p in picks.values() for r in p.slow if r.perf_ratio == 0.5]
    assert len({r.node for r in tied}) == 2 and len(tied) == 3
    assert any(p.typical is not None and p.typical.perf_ratio == 1.0 for p in picks.values())
    html = written["columns"][0]
    assert "Iterations of the slowest runs" in html and 'data-cause="' in html  # timelines and causes drawn
    assert "Generated 2026-11-02T12:00:00+00:00 by" in html
    # the slow-run tables and the sorted figures' slow runs: sorted by (ratio, node, trial), ties in order
    for v in analysis.variants:
        mine = [r for r in runs if r.variant == v.variant]
        ordered = sorted(mine, key=lambda r: (r.perf_ratio, r.node, r.trial))
        want = [[r.node, r.trial] for r in ordered if r.slow]
        section = html.split(f'data-variant="{v.variant}">', 1)[1].split("</section>", 1)[0]
        table = section.split("<summary>Slow runs of", 1)[1].split("</table>", 1)[0]
        rows = re.findall(r'<tr><td>([^<]*)</td><td class="num">(\d+)</td>', table)
        assert [[node, int(trial)] for node, trial in rows] == want and want
        spec = re.search(r'data-figure="sorted".*?-spec">(.*?)</script>', section).group(1)
        drawn = next(t for t in json.loads(spec)["data"] if t["name"].startswith("slow"))
        assert [c[:2] for c in drawn["customdata"]] == want
