"""The native scanner's fast path (the series after the previous one, taken by a memcmp of its text) accepts
exactly what the line reader accepts, with the same numbers: each case edits one line of a valid file at the
edges that path checks, and the scanner must agree with the reference reader (or hand the file back)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tailscope.importers import ImportInputError
from tailscope.importers.fast_csv import FastReaderFallback
from tailscope.importers.perfcounts import _perfscan, _read_lines, _read_native

pytestmark = pytest.mark.skipif(_perfscan() is None, reason="native scanner not built")

HEADER = "TSC_ratio = 21\nReference_TSC = 25370245177304324\nReference_WallTime = 1532379481.075971\n"


def lines(samples: int = 3) -> list[str]:
    out = []
    for s in range(samples):
        out.append(f"tsc[{s}] = {25370245187777968 + s * 2_100_000_000}")
        out.append(f'core_counts[0]["L2_RQSTS.MISS"][{s}] = {1000 + s}')
        out.append(f'core_counts[1]["L2_RQSTS.MISS"][{s}] = {2000 + s}')
        out.append(f"pkg_therm_status[0][{s}] = 0x8839080{s}")
    return out


# (index among the sample lines, its new text); 6 is core_counts[1] of sample 1, a fast-path line
EDITS = [
    (6, ' core_counts[1]["L2_RQSTS.MISS"][1] = 2001'),  # leading blank
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 2001\r'),  # CRLF
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1]\t=\t2001 \t'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1]=2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][01] = 2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 0x7D1'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 0X7d1'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 0x'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 0x00000000000000007D1'),  # 19 hex digits
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 18446744073709551615'),  # 2^64 - 1: above 48 bits
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 18446744073709551616'),  # 2^64
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 000000000000000000002001'),  # 24 digits
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 2001x'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 20 01'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = -2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] ='),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] 2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][] = 2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1][1] = 2001'),  # one index more
    (6, 'core_counts[1]["L2_RQSTS.MISS"][0000000000000000001] = 2001'),  # 19 digits
    (6, 'core_counts[1]["L2_RQSTS.MISS"][x] = 2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"]x[1] = 2001'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 2001 -- a comment'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 2001\x00'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][1] = 2001é'),
    (6, 'core_counts[1]["L2_RQSTS.MISS"][2] = 2001'),  # a sample number out of place
    (6, 'core_counts[1]["L2_RQSTS.MISSX"][1] = 2001'),  # a key one byte longer
    (6, 'core_counts[1]["L2_RQSTS.MIS"][1] = 2001'),  # one byte shorter
    (6, "core_counts[1][1] = 2001"),
    (7, "pkg_therm_status[0][1] = 0x88390801" + " " * 70000),  # a line longer than MAX_LINE
    (11, "pkg_therm_status[0][2] = 0x88390802"),  # the last line, then no newline (below)
]


@pytest.mark.parametrize(("index", "text"), EDITS)
@pytest.mark.parametrize("final_newline", [True, False])
def test_scanner_agrees_with_the_line_reader(
    tmp_path: Path, index: int, text: str, final_newline: bool
) -> None:
    body = lines()
    body[index] = text
    path = tmp_path / "n1.perfcounts.lua"
    path.write_bytes(
        (HEADER + "\n".join(body) + ("\n" if final_newline else "")).encode("utf-8", "surrogatepass")
    )
    try:
        reference = _read_lines(path)
    except ImportInputError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
        reference = None
    try:
        native = _read_native(path, _perfscan())
    except FastReaderFallback:
        return  # a strict subset: the line reader decides (above)
    except ImportInputError as exc:
        assert reference is None, f"the scanner refused what the line reader takes: {exc}"
        return
    assert reference is not None, "the scanner took what the line reader refuses"
    assert [k.text for k in native.keys] == [k.text for k in reference.keys]
    assert np.array_equal(native.key_codes, reference.key_codes)
    assert np.array_equal(native.samples, reference.samples)
    assert [int(v) for v in native.values] == [int(v) for v in reference.values]
    assert native.header == reference.header


def test_the_unedited_file_takes_the_fast_path(tmp_path: Path) -> None:
    # The control: the valid file itself is read by the scanner, not handed back.
    path = tmp_path / "n1.perfcounts.lua"
    path.write_text(HEADER + "\n".join(lines()) + "\n")
    native = _read_native(path, _perfscan())
    assert native.n_samples == 3 and len(native.keys) == 4
    assert [int(v) for v in native.values][5:7] == [1001, 2001]
