"""The one program-reader interface (importers/reader.py): fresh readers by name, detection from a program's
first lines, figures always finite, and errors that name file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tailscope.importers import ImportInputError
from tailscope.importers.reader import PROGRAM_FORMATS, detect_format, program_reader, read_program

FIXTURES = Path(__file__).parent / "fixtures"


def test_unknown_format_is_one_line():
    with pytest.raises(ImportInputError, match=r"^unknown program format 'xhpl' \(expected one of hpcc, hpl"):
        program_reader("xhpl")


def test_readers_are_fresh():
    one, two = program_reader("hpl"), program_reader("hpl")
    assert one is not two
    one.feed(1, "WR11C2R4  1000  128  1  2  0.28  2.373e+00")
    with pytest.raises(ImportInputError, match=r"^two: no HPL result lines"):
        two.finish("two")


@pytest.mark.parametrize(
    ("fixture", "format"), [("hpccoutf-n1000-vm.txt", "hpcc"), ("xhpl-2.3-three-runs.out", "hpl")]
)
def test_detect_format(fixture, format):
    lines = (FIXTURES / fixture).read_text().splitlines()
    assert detect_format(lines) == format
    assert format in PROGRAM_FORMATS
    runs = read_program(format, lines, fixture)
    assert runs and all(r.figures[0].name == "gflops" and r.figures[0].unit == "GFLOPS" for r in runs)
    assert all(lines[r.figures[0].line - 1].startswith("WR11C2R4") for r in runs)


def test_detect_nothing():
    assert detect_format(["hello", "world"]) is None
