"""Attribution of job slowdowns to nodes: slow nodes found and their partners (the nodes sharing their jobs)
not blamed, where the naive per-node comparison blames them (the control); the small live-cluster shape (3
nodes, 3 classes); the statistics against hand-computed values; a class drifting over weeks; since when;
figures of merit in place of elapsed time."""

from __future__ import annotations

import datetime as dt
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tailscope.jobs.attribution import Attribution, _signed_rank_k, bh, hodges_lehmann
from tailscope.jobs.classes import MIN_CLASS_JOBS, slowdowns

sys.path.insert(0, str(Path(__file__).parent))
from fleet import START, make_fleet


def frame_of(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for c in ("submit_at", "start_at", "end_at"):
        frame[c] = pd.to_datetime(frame[c], utc=True)
    return frame


def flagged(results) -> dict[str, float]:
    return {r.node: r.percent for r in results if r.slow}


@pytest.fixture(scope="module")
def fleet():
    return make_fleet(
        nodes=64, jobs=4000, days=28, classes=12, slow={12: 0.06, 40: 0.04}, max_size=8, seed=11
    )


def naive(timed: pd.DataFrame) -> dict[str, float]:
    """The per-node comparison a notebook would do: the mean slowdown of the node's jobs, z-tested, BH."""
    from scipy.special import ndtr

    pairs = timed.assign(node=timed["nodelist"].map(__import__("tailscope.hostlist").hostlist.expand))
    pairs = pairs.explode("node")
    per = pairs.groupby("node")["slowdown"].agg(["mean", "count"])
    z = per["mean"] / (timed["slowdown"].std() / np.sqrt(per["count"]))
    q = bh(ndtr(-z.to_numpy()))
    return {n: m for n, m, qq in zip(per.index, per["mean"], q, strict=True) if qq < 0.05 and m > 0}


def test_slow_nodes_are_found_and_their_partners_are_not_blamed(fleet):
    timed = slowdowns(frame_of(fleet.rows)).jobs
    results = Attribution(timed).results()
    found = flagged(results)
    assert set(found) == set(fleet.slow)
    partners = set().union(*fleet.partners.values()) - set(fleet.slow)
    assert len(partners) >= 4
    assert set(naive(timed)) & partners  # the control: the naive comparison does blame partners
    by_node = {r.node: r for r in results}
    for node, effect in fleet.slow.items():
        r = by_node[node]
        assert r.differences == "jobs" and 6 <= r.classes <= 12  # under 20 classes: one difference per job
        assert math.expm1(r.lower) < effect < math.expm1(r.upper), (node, r)
        assert r.q < 1e-6


def test_the_live_cluster_shape_names_the_slowed_node_and_no_other():
    """3 nodes, 66 one-node jobs of 3 classes, one node 20% slower: fewer than 20 classes per node, so the
    differences are per job, and the p-value is the Monte Carlo permutation's."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(66):
        node = f"n{(i // 3) % 3 + 1}"  # every class on every node in turn
        cls = i % 3
        start = START + dt.timedelta(minutes=5 * i)
        elapsed = (10.0 + 5 * cls) * math.exp(rng.normal(0, 0.03)) * (1.2 if node == "n2" else 1.0)
        rows.append(
            {
                "cluster": "test",
                "job_id": str(i + 1),
                "name": f"class{cls}",
                "user_name": "root",
                "account": "root",
                "partition": "debug",
                "nodelist": node,
                "nnodes": 1,
                "cpus": 1,
                "submit_at": start,
                "start_at": start,
                "end_at": start + dt.timedelta(seconds=elapsed),
                "elapsed_s": round(elapsed),
                "state": "COMPLETED",
                "exit_code": "0:0",
                "comment": None,
            }
        )
    timed = slowdowns(frame_of(rows)).jobs
    results = {r.node: r for r in Attribution(timed).results()}
    assert {n for n, r in results.items() if r.slow} == {"n2"}
    r = results["n2"]
    assert r.differences == "jobs" and r.classes == 3 and r.jobs == 21
    assert r.lower is not None and 0.10 < math.expm1(r.effect) < 0.30
    assert r.p >= 1 / 2000  # a Monte Carlo p-value: never below 1 / (1 + B)


def test_statistics_against_hand_computed_values():
    assert hodges_lehmann(np.array([1.0, 2, 3, 4, 5, 6])) == (3.5, 1.0, 6.0)  # k = 1 at n = 6 (0.969)
    center, lo, hi = hodges_lehmann(np.array([0.5, 1.5]))
    assert center == 1.0 and lo is None and hi is None
    # signed-rank critical values (two-sided 0.05, the published table): n=6: 0, n=10: 8, n=20: 52, n=31: 147,
    # n=32: 159 -> k = T + 1
    assert [_signed_rank_k(n) for n in (5, 6, 10, 20, 31, 32)] == [None, 1, 9, 53, 148, 160]
    assert _signed_rank_k(100) == 1954  # normal approximation: 2525 - 1.96 * 290.84
    q = bh(np.array([0.01, 0.04, 0.03, 0.2]))
    assert np.allclose(q, [0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.2])


def test_a_class_drifting_over_weeks_does_not_make_a_node_that_came_late_slow():
    """One class's input grows 10% a week; node c09 joins in the fourth week. Against the class's overall
    median its jobs would all look slow (the control); against their own week's they do not."""
    rng = np.random.default_rng(5)
    rows = []
    for i in range(1200):
        start = START + dt.timedelta(hours=0.56 * i)
        week = (start - START).days // 7
        node = f"c{rng.integers(1, 9 if week < 3 else 10):02d}"
        elapsed = 1000.0 * 1.10**week * math.exp(rng.normal(0, 0.03))
        rows.append(
            {
                "cluster": "",
                "job_id": str(i),
                "name": "grow",
                "user_name": "u",
                "account": None,
                "partition": "p",
                "nodelist": node,
                "nnodes": 1,
                "cpus": 8,
                "submit_at": start,
                "start_at": start,
                "end_at": start + dt.timedelta(seconds=elapsed),
                "elapsed_s": round(elapsed),
                "state": "COMPLETED",
                "exit_code": None,
                "comment": None,
            }
        )
    timed = slowdowns(frame_of(rows)).jobs
    assert flagged(Attribution(timed).results()) == {}
    whole = timed.assign(
        slowdown=timed["log_value"] - timed["log_value"].median(), log_value=timed["log_value"], week=0
    )
    assert "c09" in flagged(Attribution(whole).results())  # the control: one median for all weeks blames it


def test_since_is_the_day_the_node_became_slow():
    fleet = make_fleet(nodes=40, jobs=3000, days=28, classes=8, slow={}, max_size=4, seed=8)
    change = START + dt.timedelta(days=15)
    rows = []
    for r in fleet.rows:
        r = dict(r)
        if (
            "c07" in __import__("tailscope.hostlist").hostlist.expand(r["nodelist"])
            and r["start_at"] >= change
        ):
            r["elapsed_s"] = round(r["elapsed_s"] * 1.15)
        rows.append(r)
    timed = slowdowns(frame_of(rows)).jobs
    fit = Attribution(timed)
    result = next(r for r in fit.results() if r.node == "c07")
    assert result.slow
    since = fit.since(result)
    assert since is not None and abs((since - pd.Timestamp(change)).days) <= 2
    # its effect is its level since then (15%), not the whole history's mix of before and after
    level = fit.level_since(result, since)
    assert abs(math.expm1(level.effect) - 0.15) < 0.03 and math.expm1(result.effect) < 0.10
    assert level.lower is not None and level.lower > 0.10 and level.jobs < result.jobs
    assert level.q == result.q and level.slow


def test_a_figure_of_merit_replaces_elapsed_where_the_class_has_it():
    from tailscope.hostlist import expand

    fleet = make_fleet(nodes=20, jobs=400, days=14, classes=2, slow={}, max_size=2, seed=9)
    frame = frame_of(fleet.rows)
    done = frame[frame["state"] == "COMPLETED"]
    first = done[done["name"] == done["name"].iloc[0]]
    slow_node = expand(first["nodelist"].iloc[0])[0]
    on_it = {j: slow_node in expand(nl) for j, nl in zip(first["job_id"], first["nodelist"], strict=True)}
    figures = {
        ("synth", j): {"ns_per_day": {"value": 45.0 if hit else 50.0, "higher_is_better": True}}
        for j, hit in on_it.items()
    }
    timed = slowdowns(frame, figures=figures)
    basis = timed.jobs.groupby("class")["basis"].first().to_dict()
    assert sorted(basis.values()) == ["elapsed", "figure:ns_per_day"]
    figured = timed.jobs[timed.jobs["basis"] == "figure:ns_per_day"]
    hit = figured["job_id"].map(on_it).astype(bool)
    assert len(figured) >= MIN_CLASS_JOBS and 0 < hit.sum() < len(figured) / 2
    assert np.allclose(figured.loc[hit, "slowdown"], -math.log(0.9))  # 10% fewer ns/day: slower
    assert np.allclose(figured.loc[~hit, "slowdown"], 0.0)


def test_classes_by_default_by_choice_and_by_tag():
    from tailscope.jobs.classby import class_by_option
    from tailscope.jobs.classes import labels

    base = {"cluster": "", "account": "a", "partition": "big", "nodelist": "n[1-4]", "nnodes": 4, "cpus": 128,
            "submit_at": START, "start_at": START, "end_at": START, "elapsed_s": 10.0, "state": "COMPLETED",
            "exit_code": None}  # fmt: skip
    rows = [
        {**base, "job_id": "1", "name": "lmp", "user_name": "ann", "comment": None},
        {
            **base,
            "job_id": "2",
            "name": "lmp-renamed",
            "user_name": "bob",
            "comment": "run 7; tailscope:water-box",
        },
    ]
    frame = frame_of(rows)
    assert labels(frame).tolist() == ["ann:lmp N=4 cpn=32 @big", "tailscope:water-box"]
    assert labels(frame, class_by_option("partition,nodes")).tolist() == ["@big N=4", "tailscope:water-box"]
    with pytest.raises(Exception, match="expected a comma list of user, name, nodes"):
        class_by_option("user,colour")
