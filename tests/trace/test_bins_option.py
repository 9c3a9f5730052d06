"""`trace --bins`: finite, positive, strictly increasing MiB/s edges, else one line and exit 2 before anything
is traced (nan, inf and a repeated edge were accepted)."""

from __future__ import annotations

import pytest

from tailscope.cli import main
from tailscope.trace.timeline import parse_bins


@pytest.mark.parametrize(
    ("text", "words"),
    [("nan", "finite positive"), ("inf", "finite positive"), ("100,-inf", "finite positive"),
     ("0,1", "finite positive"), ("1,1", "strictly increasing"), ("200,100", "strictly increasing"),
     ("", "expected MiB/s edges"), ("1,,2", "expected MiB/s edges")],
)  # fmt: skip
def test_bad_bins_are_one_line(capsys, text, words):
    assert main(["trace", "--bins", text, "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--bins {text}: expected" in err and words in err


def test_good_bins():
    assert parse_bins("100,200,1024") == (100.0, 200.0, 1024.0)
    assert parse_bins("0.5") == (0.5,)
