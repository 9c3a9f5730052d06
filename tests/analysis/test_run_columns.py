"""The analysed runs held by column (analysis/run_columns.py): the same runs, the same JSON bytes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from tailscope.analysis.model import CauseFinding, KindEvidence, RunVerdict
from tailscope.analysis.run_columns import COLUMNS, PER_RUN, RunVerdicts
from tailscope.jsonout import encode, encode_chunks


def _runs(n: int) -> list[RunVerdict]:
    """Runs with what the columns must carry unchanged: NaN and infinite numbers, texts that need escapes or
    are not ASCII, and a few runs with evidence, extras, causes or figures of their own."""
    out = []
    for i in range(n):
        value = [1.5, math.nan, math.inf, -0.0, 1e300, 12345.678901234567][i % 6]
        flagged = i % 7 == 3
        out.append(
            RunVerdict(
                run_id=f"r{i:05d}",
                node=["n01", 'n"2\\', "nœud-3\u2028"][i % 3],
                probe="stream",
                variant=["triad", "copy"][i % 2],
                trial=i,
                started_at=f"2026-11-29T05:{i % 60:02d}:00Z",
                value=value,
                unit="GB/s",
                perf_ratio=value / 2 if math.isfinite(value) else value,
                scaled_value=-value,
                robust_score=float(i) - 3.25,
                robust_outlier=i % 5 == 0,
                slow=flagged,
                slowdown=0.125,
                kind="systematic" if flagged else "none",
                evidence=KindEvidence(10, 4, 0.4, 0.9, 0.8, 0.05, reference=None) if flagged else None,
                extras={"noise": {"p99": 1.5, "hist": [1, 2]}} if i % 11 == 0 else {},
                flagged=flagged,
                causes=(CauseFinding("os-noise", 0.5, "high", {"ticks": [1, 2]}, "busy", "isolate"),)
                if flagged
                else (),
                figures=({"name": "copy", "value": 2.0, "unit": "GB/s", "params": {}},) if i % 4 == 1 else (),
            )
        )
    return out


def _by_column(runs: list[RunVerdict]) -> RunVerdicts:
    """`runs` as the analysis holds them (summary._run_verdicts): arrays, and the per-run fields of the runs
    that have them; not `RunVerdicts.of`, which keeps the objects."""
    columns = {name: np.array([getattr(r, name) for r in runs], dtype=kind) for name, kind in COLUMNS.items()}
    extra = {
        i: {name: getattr(r, name) for name, empty in PER_RUN.items() if getattr(r, name) != empty()}
        for i, r in enumerate(runs)
    }
    return RunVerdicts(columns, extra)


def _same(built: object, runs: object) -> bool:
    """Equal runs, field by field (by repr: a NaN read back from a column is another float object)."""
    return repr(list(built)) == repr(list(runs))  # type: ignore[call-overload]


@dataclasses.dataclass(frozen=True)
class _Analysis:  # a dataclass with a long runs field, as CampaignAnalysis for encode_chunks
    campaign: str
    runs: object
    notes: tuple[str, ...] = ("a note",)


def test_the_runs_by_column_are_the_runs_and_their_fields_in_declared_order() -> None:
    runs = _runs(40)
    held = _by_column(runs)
    assert len(held) == 40
    assert _same(held, runs)
    assert _same([held[7], held[-1]], [runs[7], runs[-1]]) and _same(held[2:5], runs[2:5])
    assert list(held[0].__dict__) == list(RunVerdict.__dataclass_fields__)
    with pytest.raises(IndexError):
        held[40]
    assert _same(held.rows(held.column("slow")), [r for r in runs if r.slow])
    assert _same(held.take([5, 1]), [runs[5], runs[1]])
    own = [i for i, r in enumerate(runs) if r.evidence or r.extras or r.causes or r.figures]
    assert held.with_extra() == own
    assert all(a is b for a, b in zip(held, held, strict=True))  # built once, then the same objects


def test_analyze_json_of_the_runs_by_column_is_byte_for_byte_the_objects_json() -> None:
    runs = _runs(53)
    as_objects = encode(_Analysis("c", tuple(runs)))
    held = _by_column(runs)
    assert encode(_Analysis("c", held)) == as_objects
    for chunk in (1, 7, 53, 2000):  # the runs list cut at every place, and not at all
        assert b"".join(encode_chunks(_Analysis("c", held), chunk_items=chunk)) == as_objects
    assert b"".join(encode_chunks(_Analysis("c", RunVerdicts.of(runs)), chunk_items=5)) == as_objects
    empty = RunVerdicts({name: np.zeros(0, dtype=kind) for name, kind in COLUMNS.items()})
    assert b"".join(encode_chunks(_Analysis("c", empty))) == encode(_Analysis("c", ()))


def test_figures_are_set_for_the_runs_named_and_the_rest_unchanged() -> None:
    runs = _runs(12)
    held = _by_column(runs)
    figures = {"r00002": ({"name": "add", "value": 1.0},), "missing": ({"name": "x"},)}
    filled = held.with_figures(figures)
    expected = [dataclasses.replace(r, figures=figures[r.run_id]) if r.run_id in figures else r for r in runs]
    assert _same(filled, expected)
    assert _same(RunVerdicts.of(runs).with_figures(figures), expected)
    assert _same(held, runs)  # held itself is unchanged


def test_columns_of_different_lengths_are_refused() -> None:
    columns = {name: np.zeros(3, dtype=kind) for name, kind in COLUMNS.items()}
    columns["node"] = np.zeros(2, dtype=object)
    with pytest.raises(ValueError, match="different lengths"):
        RunVerdicts(columns)
