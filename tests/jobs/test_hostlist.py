"""Slurm's hostlist syntax, expanded by tailscope's own parser: every form sacct, the Slurm environment and a
campaign spec hold, and every malformed or oversized list refused in one line before anything is built."""

from __future__ import annotations

import time

import pytest

from tailscope.hostlist import MAX_HOSTS, HostlistError, count, expand, first


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n1", ["n1"]),
        ("n[1-3]", ["n1", "n2", "n3"]),
        ("n[1,3]", ["n1", "n3"]),
        ("c[001-004,007]", ["c001", "c002", "c003", "c004", "c007"]),
        ("n[9-11]", ["n9", "n10", "n11"]),  # no padding: the first bound's width
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("r[1-2]n[01-03]", ["r1n01", "r1n02", "r1n03", "r2n01", "r2n02", "r2n03"]),
        ("a1,b[2-3]", ["a1", "b2", "b3"]),
        ("n[1-2]-ib,gpu[7]", ["n1-ib", "n2-ib", "gpu7"]),
        ("x-[0-1].cluster", ["x-0.cluster", "x-1.cluster"]),
    ],
)
def test_expands_every_form(text, names):
    assert expand(text) == names
    assert count(text) == len(names)
    assert first(text) == names[0]  # a job's batch host, nothing else built


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("n[1-3", "not closed"),
        ("n1-3]", "without '['"),
        ("n[[1-2]]", "inside a bracket"),
        ("n[3-1]", "backwards"),
        ("n[a-b]", "expected a number"),
        ("n[1-]", "expected a number"),
        ("n[]", "expected a number"),
        ("a,,b", "empty name"),
        ("a,", "empty name"),
        ("n[1-2] m1", "space or control"),
        ("n[1-2];rm -rf /", "space or control"),
        ("n[0000000000001-2]", "digits"),
    ],
)
def test_malformed_lists_are_one_line(text, why):
    with pytest.raises(HostlistError) as err:
        expand(text)
    assert why in str(err.value) and "\n" not in str(err.value)


def test_a_huge_list_is_refused_before_anything_is_built():
    start = time.perf_counter()
    for text in ("n[0-999999999]", "r[0-999]n[0-999]", ",".join(f"a[1-{MAX_HOSTS // 4}]" for _ in range(5))):
        with pytest.raises(HostlistError, match="more than 100,000 names"):
            expand(text)
    assert time.perf_counter() - start < 2.0  # counted, never expanded (the expansion would take minutes)
    assert len(expand(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS  # the bound itself is allowed
