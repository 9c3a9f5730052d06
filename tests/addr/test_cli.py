"""The `tailscope addr` verbs through their own parser: output formats, exit codes, one-line errors."""

from __future__ import annotations

import argparse
import io
import json
import sys

import numpy as np
import pytest
from addr_builders import every_line, random_pages, write_campaign

from tailscope.addr.cli import add_addr_parser
from tailscope.addr.detect import slice_pmus
from tailscope.addr.errors import AddrInputError
from tailscope.addr.tables import builtin_model, load_model


def run(argv: list[str], stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str]:
    """Parse with a fresh parser and run the verb; AddrInputError becomes exit 2 as in the product CLI."""
    parser = argparse.ArgumentParser(prog="tailscope")
    add_addr_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        code = args.func(args, out)
    except AddrInputError as exc:
        assert "\n" not in str(exc)
        return 2, str(exc)
    return code, out.getvalue()


def test_map_arguments_file_and_stdin_print_one_slice_per_line_in_order(tmp_path, rng, monkeypatch):
    model = builtin_model("SKX_24")
    a = rng.integers(0, model.valid_limit, 500, dtype=np.uint64)
    expected = [str(s) for s in model.slices(a)]
    text = "\n".join(f"0x{x:x}" if i % 2 else str(x) for i, x in enumerate(a.tolist())) + "\n"
    (tmp_path / "addrs.txt").write_text(text)
    assert run(["addr", "map", "--model", "SKX_24", "--input", str(tmp_path / "addrs.txt")]) == (
        0,
        "\n".join(expected) + "\n",
    )
    code, out = run(["addr", "map", "--model", "SKX_24", "--input", "-"], text.encode(), monkeypatch)
    assert code == 0 and out.split() == expected
    code, out = run(["addr", "map", "--model", "SKX_24", *[hex(x) for x in a[:5].tolist()]])
    assert out.split() == expected[:5]


def test_map_with_table_files_and_json(tmp_path, rng):
    shared = builtin_model("SKX_20")
    from tailscope.addr.tables import write_tables

    base, masks = write_tables(shared, tmp_path, "X_20-slice")
    a = rng.integers(0, shared.valid_limit, 20, dtype=np.uint64)
    code, out = run(
        ["addr", "map", "--base-sequence", str(base), "--masks", str(masks), "--json", *map(str, a)]
    )
    data = json.loads(out)
    assert code == 0 and data["model"]["name"] == "X_20-slice" and data["model"]["high_bit"] == 37
    assert [r["slice"] for r in data["addresses"]] == shared.slices(a).tolist()
    assert data["addresses"][0]["address"] == hex(int(a[0]))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["addr", "map", "--model", "SKX_24", "0x4000000000"],
            "argument 1: physical address 0x4000000000 is beyond",
        ),
        (["addr", "map", "--model", "SKX_24", "0x40", "1x"], "argument 2: expected a physical address"),
        (["addr", "map", "--model", "SKX_99", "0x40"], "no built-in slice-hash model 'SKX_99'"),
        (["addr", "map", "--model", "SKX_24"], "give the addresses as arguments"),
        (["addr", "map", "--masks", "m.tbl", "0x0"], "--base-sequence and --masks go together"),
    ],
)
def test_map_errors(argv, message):
    code, text = run(argv)
    assert code == 2 and message in text


def test_map_file_errors_name_the_line(tmp_path):
    (tmp_path / "a.txt").write_text("0x0\n0x40\n0x4000000000\n")
    code, text = run(["addr", "map", "--model", "SKX_24", "--input", str(tmp_path / "a.txt")])
    assert code == 2 and text.startswith(f"{tmp_path / 'a.txt'}:3: physical address 0x4000000000 is beyond")
    (tmp_path / "b.txt").write_text("0x0\nnot-an-address\n")
    code, text = run(["addr", "map", "--model", "SKX_24", "--input", str(tmp_path / "b.txt")])
    assert code == 2 and text == (
        f"{tmp_path / 'b.txt'}:2: expected a physical address (hex 0x... or decimal, below 2^64), "
        "got 'not-an-address'"
    )


@pytest.mark.skipif(bool(slice_pmus()), reason="this machine has uncore CHA PMUs")
def test_without_uncore_pmus_detection_and_measure_explain_what_is_missing(tmp_path):
    code, text = run(["addr", "map", "0x0"])
    assert code == 2 and "no uncore CHA PMUs" in text and "--model" in text
    code, text = run(["addr", "measure", "-o", str(tmp_path / "m.csv")])
    assert code == 2 and "no uncore_cha PMUs" in text and "bare-metal Intel Xeon" in text
    assert "guest-physical addresses do not determine host slices" in text
    assert not (tmp_path / "m.csv").exists()


def test_properties_text_and_json():
    code, out = run(["addr", "properties", "--model", "SKX_24"])
    assert code == 0
    assert (
        "every aligned block of 512 lines (32 KiB) puts 21 lines on slices 0-15; 22 lines on slices 16-23"
        in out
    )
    assert "capacity fraction lost to non-uniformity: 3.12%" in out
    code, out = run(["addr", "properties", "--model", "SKX_14", "--json"])
    data = json.loads(out)
    assert data["uniformity"]["block_lines"] == 16384 and data["uniformity"]["permutations"] == 2048
    assert sorted(set(data["uniformity"]["lines_per_slice"])) == [1024, 1192, 1200]


def test_map_and_properties_of_a_campaign(tmp_path, rng):
    model = builtin_model("SKX_24")
    trials = [("n1", 100.0, random_pages(rng, 3, model.valid_limit), np.array([0, 0, 1])) for _ in range(4)]
    write_campaign(tmp_path / "c", trials)
    code, out = run(["addr", "map", "--model", "SKX_24", "--campaign", str(tmp_path / "c")])
    rows = [line.split("\t") for line in out.splitlines()]
    assert code == 0 and rows[0] == ["run_id", "array", "thread", "physical_address", "page_size", "slice"]
    assert len(rows) == 13
    for row in rows[1:]:
        assert int(row[5]) == int(model.slices(np.array([int(row[3], 16)], dtype=np.uint64))[0])
    code, out = run(["addr", "map", "--model", "SKX_24", "--campaign", str(tmp_path / "c"), "--json"])
    pages = json.loads(out)["pages"]
    assert all(sum(p["lines_per_slice"]) == 32768 for p in pages)
    code, out = run(["addr", "properties", "--model", "SKX_24", "--campaign", str(tmp_path / "c"), "--json"])
    loads = json.loads(out)["slice_loads"]
    assert len(loads["pages"]) == 12 and len(loads["runs"]) == 4 and len(loads["threads"]) == 8
    # 2 MiB pages: every page has the block counts x 64, so every run is equally (im)balanced
    assert {round(r["imbalance"], 6) for r in loads["runs"]} == {round(22 / (512 / 24) - 1, 6)}


def test_infer_writes_tables_that_map_like_the_truth(tmp_path, rng):
    truth = builtin_model("SKX_16")
    a = every_line(random_pages(rng, 2, truth.valid_limit))
    scattered = rng.integers(0, truth.valid_limit, 2000, dtype=np.uint64)
    a = np.concatenate([a, scattered])
    lines = ["address,slice"] + [
        f"0x{x:x},{s}" for x, s in zip(a.tolist(), truth.slices(a).tolist(), strict=True)
    ]
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    code, out = run(["addr", "infer", str(tmp_path / "s.csv"), "-o", str(tmp_path / "out"), "--seed", "1"])
    assert code == 0 and "inferred a 16-slice model" in out and "wrote" in out
    model = load_model(
        tmp_path / "out" / "BaseSequence_inferred_16-slice.tbl",
        tmp_path / "out" / "PermSelectMasks_inferred_16-slice.tbl",
    )
    fresh = rng.integers(0, truth.valid_limit, 100_000, dtype=np.uint64)
    assert (model.slices(fresh) == truth.slices(fresh)).all()
    code, out = run(
        ["addr", "infer", str(tmp_path / "s.csv"), "-o", str(tmp_path / "o2"), "--json", "--name", "n"]
    )
    data = json.loads(out)
    assert data["method"] == "linear" and data["written"][0].endswith("BaseSequence_n_16-slice.tbl")


def test_infer_input_errors(tmp_path):
    (tmp_path / "s.csv").write_text("address,slice\n0x0,1\n0x40,one\n")
    code, text = run(["addr", "infer", str(tmp_path / "s.csv"), "-o", str(tmp_path / "o")])
    assert code == 2 and text.startswith(f"{tmp_path / 's.csv'}:3: expected a slice id")
    code, text = run(
        ["addr", "infer", str(tmp_path / "s.csv"), "-o", str(tmp_path / "o"), "--holdout", "1.5"]
    )
    assert code == 2


def test_measure_simulated_then_explain_json(tmp_path, rng):
    code, out = run(
        [
            "addr",
            "measure",
            "-o",
            str(tmp_path / "m.csv"),
            "--simulate",
            "SKX_16",
            "--pages",
            "1",
            "--seed",
            "3",
        ]
    )
    assert code == 0 and "1 complete 2 MiB pages" in out
    trials = [
        ("n1", 100.0 - (5.5 if i % 9 == 0 else 0), random_pages(rng, 2, 1 << 38), None) for i in range(30)
    ]
    write_campaign(tmp_path / "c", trials)
    code, out = run(
        ["addr", "explain", str(tmp_path / "c"), "--model", "SKX_24", "--json", "--permutations", "99"]
    )
    data = json.loads(out)
    assert code == 0 and data["model"] == "SKX_24-slice"
    (v,) = data["variants"]
    assert v["slow"] == 4 and len(v["runs"]) == 30 and v["conflict"] is not None
    code, text = run(["addr", "explain", str(tmp_path / "c"), "--model", "SKX_24", "--order", "9"])
    assert code == 2 and "--order 9" in text


def test_a_campaign_from_other_nodes_needs_a_named_model(tmp_path, rng):
    write_campaign(tmp_path / "c", [("elsewhere-n7", 100.0, random_pages(rng, 2, 1 << 38), None)])
    code, text = run(["addr", "map", "--campaign", str(tmp_path / "c")])
    assert code == 2 and "ran on elsewhere-n7, not on this node" in text and "--model" in text
    code, out = run(["addr", "explain", str(tmp_path / "c"), "--permutations", "99"])
    assert code == 0 and "no slice-hash model" in out


def test_a_vm_campaign_says_guest_physical_addresses_do_not_determine_host_slices(tmp_path, rng, capsys):
    """addr map --campaign (a note on stderr, stdout stays one table; `notes` in JSON) and addr explain, for a
    campaign whose node facts say kvm; nothing is said for a bare-metal campaign."""
    trials = [("n1", 100.0, random_pages(rng, 2, 1 << 37), None) for _ in range(8)]
    write_campaign(tmp_path / "vm", trials, virtualization="kvm")
    write_campaign(tmp_path / "metal", trials, virtualization="none")
    statement = "guest-physical addresses do not determine host slices"
    code, out = run(["addr", "map", "--model", "SKX_24", "--campaign", str(tmp_path / "vm")])
    err = capsys.readouterr().err
    assert code == 0 and out.splitlines()[0].startswith("run_id\t") and len(out.splitlines()) == 17
    assert statement in err and "n1 ran in a virtual machine (kvm)" in err and "only a model check" in err
    code, out = run(["addr", "map", "--model", "SKX_24", "--campaign", str(tmp_path / "vm"), "--json"])
    (note,) = json.loads(out)["notes"]
    assert statement in note
    code, out = run(["addr", "explain", str(tmp_path / "vm"), "--model", "SKX_24", "--permutations", "99"])
    assert code == 0 and statement in out
    code, out = run(["addr", "map", "--model", "SKX_24", "--campaign", str(tmp_path / "metal"), "--json"])
    assert json.loads(out)["notes"] == [] and statement not in capsys.readouterr().err
    code, out = run(["addr", "explain", str(tmp_path / "metal"), "--model", "SKX_24", "--permutations", "99"])
    assert code == 0 and statement not in out


def test_infer_writes_only_the_range_its_data_span(tmp_path, rng):
    """Frames that tie bit 25 to bit 24: the tables cover addresses below 2^24 only, and say so; frames whose
    span misses frame 0: no table can hold the model, exit 2 with the reason, nothing written."""
    truth = builtin_model("SKX_24")
    pages = random_pages(rng, 40, truth.valid_limit)
    bit24 = (pages >> np.uint64(24)) & np.uint64(1)
    tied = np.unique((pages & ~np.uint64(1 << 25)) | (bit24 << np.uint64(25)))
    for name, frames in (("tied", tied), ("no0", np.unique(pages | np.uint64(1 << 21)))):
        a = every_line(frames)
        lines = ["address,slice"] + [
            f"0x{x:x},{s}" for x, s in zip(a.tolist(), truth.slices(a).tolist(), strict=True)
        ]
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
    code, out = run(["addr", "infer", str(tmp_path / "tied.csv"), "-o", str(tmp_path / "t"), "--seed", "1"])
    assert code == 0 and "only on the span of the measured frames" in out
    assert "tables hold the model on addresses below 2^24 = 16 MiB" in out
    written = load_model(
        tmp_path / "t" / "BaseSequence_inferred_24-slice.tbl",
        tmp_path / "t" / "PermSelectMasks_inferred_24-slice.tbl",
    )
    low = rng.integers(0, 1 << 24, 50_000, dtype=np.uint64)
    assert written.high_bit == 23 and (written.slices(low) == truth.slices(low)).all()
    # every frame has bit 21 set: frame 0 (bit 21 clear) is outside the span of any odd number of them
    code, text = run(["addr", "infer", str(tmp_path / "no0.csv"), "-o", str(tmp_path / "n"), "--seed", "1"])
    assert code == 2 and "determine the map only on their span" in text and "measure more" in text
    assert "address 0 is outside it" in text and not (tmp_path / "n").exists()
