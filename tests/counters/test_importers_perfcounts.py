"""The seed sampler's text format: import, checks with file:line, exit 2, nothing stored lost, round trip."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import seed_file

from tailscope.cli import main
from tailscope.importers import ImportInputError
from tailscope.importers.perfcounts import _perfscan, _read_fast, _read_lines, _read_native, parse
from tailscope.store.campaign import Campaign
from tailscope.store.views import connect


def write(tmp_path: Path, text: str, name: str = "c591-803.perfcounts.lua") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def stored_samples(campaign: Path) -> pd.DataFrame:
    con = connect(Campaign.open(campaign))
    try:
        return con.execute("SELECT * FROM samples ORDER BY node, sample, pmu, unit, event").df()
    finally:
        con.close()


def test_import_keeps_raw_values_hex_and_times(tmp_path: Path) -> None:
    path = write(tmp_path, seed_file.text())
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "c")]) == 0
    frame = stored_samples(tmp_path / "c")
    assert set(frame["node"]) == {"c591-803"} and set(frame["source"]) == {"imported:perfcounts"}
    series = seed_file.values()
    n_series = len(series) - 3  # tsc and walltime go to columns
    assert len(frame) == 3 * n_series
    row = frame[
        (frame["pmu"] == "uncore_imc:0") & (frame["unit"] == 0) & (frame["event"] == "CAS_COUNT.READS")
    ]
    assert row["value"].tolist() == [float(v) for v in series['imc_counts[0][0]["CAS_COUNT.READS"]']]
    therm = frame[(frame["pmu"] == "package") & (frame["event"] == "pkg_therm_status") & (frame["unit"] == 0)]
    assert therm["value"].tolist() == [float(0x88390800), float(0x88390800), float(0x88410800)]
    cha = frame[(frame["pmu"] == "uncore_cha:0") & (frame["unit"] == 1)]
    assert cha["value"].tolist() == [75.0, 80.0, 95.0]
    firsts = frame.groupby("sample").first()
    assert firsts["tsc"].tolist() == series["tsc"]
    assert firsts["t_ns"].tolist() == [(s * 10**9 + 80968 * 1000) for s in series["walltime[0]"]]
    header = Campaign.open(tmp_path / "c").manifest.sample_headers["c591-803"]["imported:perfcounts"]
    assert header["TSC_ratio"] == 21 and header["IA32_FIXED_CTR_CTRL[3]"] == 0x333


def test_times_from_tsc_when_no_walltime(tmp_path: Path) -> None:
    text = "\n".join(line for line in seed_file.text().splitlines() if not line.startswith("walltime"))
    parsed = parse(write(tmp_path, text + "\n"))
    # Reference_WallTime + (tsc - Reference_TSC) / (21 x 100 MHz)
    expect = (1532379481.075971 + (seed_file.TSC0 - 25370245177304324) / 2.1e9) * 1e9
    assert abs(int(parsed.t_ns[0]) - expect) < 1000


def test_round_trip_import_export_import(tmp_path: Path) -> None:
    path = write(tmp_path, seed_file.big_text(5, cpus=8, chas=4, channels=2))
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "a")]) == 0
    out = tmp_path / "exported.perfcounts.lua"
    assert main(["export", "perfcounts", str(tmp_path / "a"), "-o", str(out)]) == 0
    assert (
        main(["import", "perfcounts", str(out), "--campaign", str(tmp_path / "b"), "--node", "c591-803"]) == 0
    )
    first, second = stored_samples(tmp_path / "a"), stored_samples(tmp_path / "b")
    assert len(first) == 5 * (8 * 7 + 2 * 4 * 4 + 2 * 2 * 5 + 4)
    pd.testing.assert_frame_equal(first, second)
    assert "0x88390800" in out.read_text()


def test_fast_and_line_readers_agree(tmp_path: Path) -> None:
    path = write(tmp_path, seed_file.big_text(4, cpus=4, chas=2, channels=2))
    fast, slow = _read_fast(path), _read_lines(path)
    assert [k.text for k in fast.keys] == [k.text for k in slow.keys]
    assert np.array_equal(fast.key_codes, slow.key_codes) and np.array_equal(fast.samples, slow.samples)
    assert [int(v) for v in fast.values] == [int(v) for v in slow.values]
    assert fast.header == slow.header and np.array_equal(fast.t_ns, slow.t_ns)


BAD_CASES = [
    # (what, edit of the lines, expected line number or None for "last line", message pattern)
    (
        "unknown array",
        lambda ls: [*ls[:12], 'foo_counts[0][1]["X"][0] = 5', *ls[12:]],
        13,
        r"unknown array 'foo_counts'",
    ),
    (
        "non-numeric",
        lambda ls: [re.sub(r"^(tsc\[1\] = )\d+", r"\g<1>12abc", x) for x in ls],
        "tsc[1]",
        r"'12abc'.*not a non-negative integer",
    ),
    (
        "negative",
        lambda ls: [re.sub(r"^(tsc\[1\] = )\d+", r"\g<1>-5", x) for x in ls],
        "tsc[1]",
        r"not a non-negative integer",
    ),
    (
        "float sample",
        lambda ls: [re.sub(r"^(tsc\[1\] = )\d+", r"\g<1>1.5e3", x) for x in ls],
        "tsc[1]",
        r"not a non-negative integer",
    ),
    (
        "above 48 bits",
        lambda ls: [x.replace("= 75", f"= {2**48}") for x in ls],
        "= 281474976710656",
        r"does not fit its 48-bit register",
    ),
    (
        "layout",
        lambda ls: [*ls, 'cha_counts[0]["SF"][2] = 5'],
        None,
        r"cha_counts takes cha_counts\[socket\]\[box\]",
    ),
    (
        "syntax",
        lambda ls: [*ls[:10], "this is not an assignment", *ls[10:]],
        11,
        r"expected `name\[index\]... = value`",
    ),
    ("duplicate", lambda ls: [*ls, ls[-1]], None, r"assigned twice"),
    (
        "skipped sample",
        lambda ls: ls + [x.replace("[2] = ", "[4] = ") for x in ls if "[2] = " in x and x[0].islower()],
        None,
        r"sample numbers skip from 2 to 4",
    ),
    (
        "truncated at a line",
        lambda ls: ls[:-5],
        None,
        r"sample 2 has \d+ of the \d+ series.*no .*file truncated",
    ),
    ("long line", lambda ls: [*ls[:9], "tsc[9] = " + "1" * 70000, *ls[9:]], 10, r"longer than 65536"),
    (
        "bad walltime part",
        lambda ls: (
            ls + [x.replace("walltime[1]", "walltime[2]") for x in ls if x.startswith("walltime[1][0]")]
        ),
        None,
        r"walltime\[0\] holds seconds",
    ),
    ("empty", lambda ls: [], None, r"no samples"),
    ("header only", lambda ls: ls[:9], None, r"no samples"),
]


@pytest.mark.parametrize("what,edit,where,pattern", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_input_names_file_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what, edit, where, pattern
) -> None:
    good = write(tmp_path, seed_file.text(), "good.perfcounts.lua")
    campaign = tmp_path / "c"
    assert main(["import", "perfcounts", str(good), "--campaign", str(campaign)]) == 0
    before = stored_samples(campaign)
    lines = edit(seed_file.text().splitlines())
    path = write(tmp_path, "\n".join(lines) + ("\n" if lines else ""), "bad.perfcounts.lua")
    capsys.readouterr()
    assert main(["import", "perfcounts", str(path), "--campaign", str(campaign)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line
    assert re.search(pattern, err), err
    if isinstance(where, int):
        assert f"{path}:{where}:" in err
    elif isinstance(where, str):
        number = next(i for i, x in enumerate(lines, start=1) if where in x)
        assert f"{path}:{number}:" in err, err
    elif lines and "no samples" not in pattern:
        assert re.search(rf"{re.escape(str(path))}:\d+:", err), err
    pd.testing.assert_frame_equal(stored_samples(campaign), before)  # nothing stored is lost or added


def test_truncated_mid_line(tmp_path: Path) -> None:
    text = seed_file.text()
    path = write(tmp_path, text[: text.rindex("=") - 3])
    with pytest.raises(ImportInputError, match=r":\d+: expected .*file truncated"):
        parse(path)


def test_second_import_of_the_same_node_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, seed_file.text())
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "c")]) == 0
    assert main(["import", "perfcounts", str(path), "--campaign", str(tmp_path / "c")]) == 2
    assert "already holds" in capsys.readouterr().err
    assert len(stored_samples(tmp_path / "c")) == 3 * (len(seed_file.values()) - 3)


def test_comments_and_blank_lines_are_accepted(tmp_path: Path) -> None:
    lines = seed_file.text().splitlines()
    text = "-- written by perf_counters\n\n" + "\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]) + "\n"
    assert parse(write(tmp_path, text)).n_samples == 3


@pytest.mark.skipif(
    _perfscan() is None, reason="libtailscope_perfscan.so not built (TAILSCOPE_NATIVE_LIB_DIR)"
)
def test_native_scanner_grows_its_buffers(tmp_path: Path) -> None:
    """Short lines (more rows than its first guess) and many header lines (more than its header buffer)."""
    header = "\n".join(f"IA32_FIXED_CTR_CTRL[{c}] = 0x333" for c in range(6000))
    body = "\n".join(f"tsc[{s}] = {s}\nwalltime[0][{s}] = {s}" for s in range(6000))
    path = write(tmp_path, header + "\n" + body + "\n")
    native, reference = _read_native(path, _perfscan()), _read_lines(path)
    assert native.n_samples == reference.n_samples == 6000
    assert native.header == reference.header and len(native.header) == 6000
    assert np.array_equal(native.t_ns, reference.t_ns)
