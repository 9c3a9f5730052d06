"""What the build went without and what running without root costs (node/build.py, issue 26)."""

from __future__ import annotations

import json

from tailscope.node import build


def test_each_missing_library_is_named_with_its_cost(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "build.json").write_text(json.dumps({"missing": ["libpfm4", "mpi", "system-blas", "odd"]}))
    record = build.build_record(bin_dir)
    facts = build.limits(record, euid=0)
    missing = facts["build_missing"]
    assert missing["libpfm4"].startswith("events are resolved from the kernel's sysfs names")
    assert missing["MPI"] == "no mpi-p2p probe"
    assert "scipy-openblas32" in missing["a system BLAS"]
    assert missing["odd"] == "see the build log"  # a name this tailscope does not know is still said
    assert facts["privilege_costs"] == []  # root: nothing lost
    lines = build.limit_lines(facts)
    assert "built without MPI: no mpi-p2p probe" in lines


def test_not_root_costs_pagemap_pools_and_injectors(tmp_path):
    facts = build.limits({"missing": []}, euid=1000)
    text = " ".join(facts["privilege_costs"])
    assert "pagemap" in text and "huge-page pools" in text and "injectors" in text
    assert all(line.startswith("not root: ") for line in build.limit_lines(facts))


def test_a_development_tree_without_build_json_reads_as_nothing_missing(tmp_path):
    assert build.build_record(tmp_path / "bin") == {}
