"""The analysed runs held by column: one array per RunVerdict field, not one object per run.

A campaign of 1,000 nodes x 50 trials has 50,000 runs; as RunVerdict objects they took 0.2 s to build and
~50 MiB at the peak of `analyze`, though a few hundred of them (the flagged ones) carry anything beyond their
numbers. `RunVerdicts` keeps the numbers and texts as numpy arrays (texts that repeat, as node, probe,
variant and unit, one object per distinct value) and the per-run fields most runs leave empty (evidence,
extras, causes, figures) only for the runs that have them.

It is a Sequence[RunVerdict]: indexing builds the RunVerdict objects asked for (equal to those the analysis
built before), and iterating builds them all once and keeps them (the terminal summary walks every run;
`analyze --json` and `report` never iterate, so they never hold them). The bulk consumers read it by column
(`column`, `rows`, `take`, `with_extra`, `per_run`): the HTML report's figures, tables, timelines and CSVs
(report/, verbs/workflow.py: 50,000 objects were 0.3-0.5 s of a 1,000-node report), and `analyze --json`
writes it from its columns (`json_items`: byte for byte what orjson writes for the objects, tests/analysis/
test_run_columns.py). `RunVerdicts.of` takes any sequence of RunVerdict (a test's tuple) and holds those
very objects beside their columns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np

from tailscope.analysis.model import RunVerdict

# The RunVerdict fields held as arrays, in the class's field order, with their numpy types (object: text).
COLUMNS: dict[str, Any] = {
    "run_id": object, "node": object, "probe": object, "variant": object, "trial": np.int64,
    "started_at": object, "value": np.float64, "unit": object, "perf_ratio": np.float64,
    "scaled_value": np.float64, "robust_score": np.float64, "robust_outlier": np.bool_, "slow": np.bool_,
    "slowdown": np.float64, "kind": object, "flagged": np.bool_,
}  # fmt: skip
# The fields held per run only where a run has them, with what every other run has.
PER_RUN: dict[str, Callable[[], Any]] = {
    "evidence": lambda: None,
    "extras": dict,  # a new dict for each run, as a dataclass default_factory gives
    "causes": tuple,
    "figures": tuple,
}
FIELDS = tuple(RunVerdict.__dataclass_fields__)  # declared order: the JSON's and __dict__'s
_EXPECTED = (*tuple(COLUMNS)[:15], "evidence", "extras", "flagged", "causes", "figures")
if _EXPECTED != FIELDS:
    raise ImportError("RunVerdict's fields are not the run columns' (analysis/run_columns.py)")
CHUNK = 5000  # runs whose values are Python lists at once, when objects are built


class RunVerdicts(Sequence[RunVerdict]):
    """The runs of an analysis, by column (see the module doc). Immutable: its arrays are read-only."""

    __slots__ = ("_columns", "_extra", "_extra_rows", "_length", "_objects")

    def __init__(
        self,
        columns: Mapping[str, np.ndarray],
        extra: Mapping[int, Mapping[str, Any]] | None = None,
        *,
        objects: Sequence[RunVerdict] | None = None,
    ) -> None:
        """`columns`: an array per name of COLUMNS, all of one length; `extra`: row -> the PER_RUN fields
        that row has (only those not as every other run has them). `objects`: the RunVerdicts these
        columns were taken from (`of`), given back as they are."""
        lengths = {len(columns[name]) for name in COLUMNS}
        if len(lengths) > 1:
            raise ValueError(f"run columns of different lengths: {sorted(lengths)}")
        self._length = lengths.pop() if lengths else 0
        held = {}
        for name in COLUMNS:
            array = np.asarray(columns[name])
            array.flags.writeable = False
            held[name] = array
        self._columns = held
        self._extra = {int(i): dict(v) for i, v in (extra or {}).items() if v}
        self._extra_rows = sorted(self._extra)
        self._objects = tuple(objects) if objects is not None else None

    @classmethod
    def of(cls, runs: Sequence[RunVerdict]) -> RunVerdicts:
        """`runs` by column: itself when it is a RunVerdicts, else its objects' values (the objects kept)."""
        if isinstance(runs, RunVerdicts):
            return runs
        runs = tuple(runs)
        columns = {}
        for name, kind in COLUMNS.items():
            values = [getattr(r, name) for r in runs]
            try:
                columns[name] = np.array(values, dtype=kind)
            except (TypeError, ValueError, OverflowError):  # an odd value a test set: kept as it is
                columns[name] = np.array(values, dtype=object)
        extra = {
            i: {name: getattr(r, name) for name, empty in PER_RUN.items() if getattr(r, name) != empty()}
            for i, r in enumerate(runs)
        }
        return cls(columns, extra, objects=runs)

    # --- Sequence ---------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> RunVerdict: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RunVerdict, ...]: ...

    def __getitem__(self, index: int | slice) -> RunVerdict | tuple[RunVerdict, ...]:
        if isinstance(index, slice):
            return tuple(self._build(range(self._length)[index]))
        position = range(self._length)[index]  # IndexError past the end, negative from the end
        return self._build([position])[0]

    def __iter__(self) -> Iterator[RunVerdict]:
        """Every run as an object, built once and then kept: a consumer that walks every run (the report, the
        terminal summary) walks them many times, and held them all as objects before anyway."""
        if self._objects is None:
            built: list[RunVerdict] = []
            for start in range(0, self._length, CHUNK):
                built.extend(self._build(range(start, min(start + CHUNK, self._length))))
            self._objects = tuple(built)
        return iter(self._objects)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RunVerdicts({self._length} runs, {len(self._extra)} with evidence, causes or figures)"

    # --- by column --------------------------------------------------------------------------------------
    def column(self, name: str) -> np.ndarray:
        """The values of one COLUMNS field of every run (a read-only array; texts as str objects)."""
        return self._columns[name]

    def with_extra(self) -> list[int]:
        """The rows (ascending) that have evidence, extras, causes or figures of their own."""
        return list(self._extra_rows)

    def per_run(self, name: str) -> dict[int, Any]:
        """Row -> the value of the PER_RUN field `name`, for the rows (ascending) whose value is not the one
        every other run has (a run without causes is not named by `per_run("causes")`)."""
        if name not in PER_RUN:
            raise KeyError(name)
        return {row: self._extra[row][name] for row in self._extra_rows if name in self._extra[row]}

    def rows(self, which: np.ndarray | Sequence[int]) -> list[RunVerdict]:
        """The RunVerdict objects of the rows a boolean mask or a list of positions selects, in order."""
        index = np.asarray(which)
        positions = np.flatnonzero(index) if index.dtype == bool else index.astype(np.int64)
        return self._build(positions.tolist())

    def take(self, which: np.ndarray | Sequence[int]) -> RunVerdicts:
        """The runs a boolean mask or a list of positions selects, in that order, by column."""
        index = np.asarray(which)
        positions = np.flatnonzero(index) if index.dtype == bool else index.astype(np.int64)
        columns = {name: array[positions] for name, array in self._columns.items()}
        held = np.flatnonzero(np.isin(positions, np.asarray(self._extra_rows, dtype=np.int64)))
        extra = {new: self._extra[int(positions[new])] for new in held.tolist()}
        objects = None if self._objects is None else [self._objects[i] for i in positions.tolist()]
        return RunVerdicts(columns, extra, objects=objects)

    def with_figures(self, figures: Mapping[str, tuple[dict[str, Any], ...]]) -> RunVerdicts:
        """These runs with `figures` (run_id -> the run's figures) set for the runs named there."""
        if self._objects is not None:
            import dataclasses

            return RunVerdicts.of(
                [
                    dataclasses.replace(r, figures=figures[r.run_id]) if figures.get(r.run_id) else r
                    for r in self._objects
                ]
            )
        extra = {i: dict(v) for i, v in self._extra.items()}
        for i, run_id in enumerate(self._columns["run_id"].tolist()):
            found = figures.get(run_id)
            if found:
                extra.setdefault(i, {})["figures"] = tuple(found)
        return RunVerdicts(self._columns, extra)

    # --- objects ----------------------------------------------------------------------------------------
    def _build(self, positions: Sequence[int]) -> list[RunVerdict]:
        """RunVerdict objects of these rows: every field set, of its declared type, in declared order."""
        positions = list(positions)
        if self._objects is not None:
            return [self._objects[i] for i in positions]
        if not positions:
            return []
        index = np.asarray(positions, dtype=np.int64)
        lists = [array[index].tolist() for array in self._columns.values()]
        head = FIELDS[:15]  # run_id .. kind: the columns in field order; flagged, the 16th, comes later
        extra = self._extra
        new = object.__new__
        out = []
        for position, row in zip(positions, zip(*lists, strict=True), strict=True):
            # RunVerdict(...) would set each field through object.__setattr__ (a frozen dataclass): several
            # times slower. The instance dict is filled in the class's field order (orjson writes that).
            run = new(RunVerdict)
            fields = run.__dict__
            fields.update(zip(head, row, strict=False))  # row's 16th, flagged, set below
            mine = extra.get(position)
            if mine is None:
                fields["evidence"] = None
                fields["extras"] = {}
                fields["flagged"] = row[15]
                fields["causes"] = ()
                fields["figures"] = ()
            else:
                fields["evidence"] = mine.get("evidence")
                fields["extras"] = dict(mine["extras"]) if "extras" in mine else {}
                fields["flagged"] = row[15]
                fields["causes"] = mine.get("causes", ())
                fields["figures"] = mine.get("figures", ())
            out.append(run)
        return out

    # --- JSON -------------------------------------------------------------------------------------------
    def json_items(self, start: int, stop: int, default: Callable[[Any], Any] = str) -> bytes:
        """The runs start..stop as `analyze --json` writes the items of its runs list (jsonout.py: two
        levels deep, joined by commas), byte for byte what orjson writes for the RunVerdict objects: the
        runs' texts and numbers encoded by orjson column by column, set into one template per run."""
        import orjson

        option = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
        if self._objects is not None:  # the objects themselves, as jsonout.encode_chunks writes them
            chunk = orjson.dumps(list(self._objects[start:stop]), default=default, option=option)
            return chunk[2:-2].replace(b"\n", b"\n  ").lstrip()
        if start >= stop:
            return b""
        lists = [_json_texts(array[start:stop], kind) for array, kind in zip(
            self._columns.values(), COLUMNS.values(), strict=True)]  # fmt: skip
        texts = dict(zip(COLUMNS, lists, strict=True))
        empty = {"evidence": b"null", "extras": b"{}", "causes": b"[]", "figures": b"[]"}
        for name, text in empty.items():
            texts[name] = [text] * (stop - start)
        rows = self._extra_rows
        for row in rows[bisect.bisect_left(rows, start) : bisect.bisect_left(rows, stop)]:
            for name, value in self._extra[row].items():  # as orjson nests it: its lines three levels deep
                dumped = orjson.dumps(value, default=default, option=option)
                texts[name][row - start] = dumped.replace(b"\n", b"\n      ")
        return b",\n    ".join(
            [_TEMPLATE % values for values in zip(*(texts[n] for n in FIELDS), strict=True)]
        )


def _json_texts(values: np.ndarray, kind: Any) -> list[bytes]:
    """Each value as orjson writes it: one call for the column, cut into its items."""
    import orjson

    if kind is object:  # texts: one item a line, so a comma inside a text cannot cut it (a line break is \n)
        if not len(values):
            return []
        return orjson.dumps(values.tolist(), option=orjson.OPT_INDENT_2)[4:-2].split(b",\n  ")
    if kind is np.bool_:
        return list(map(_BOOLEANS.__getitem__, values.tolist()))
    return orjson.dumps(values.tolist())[1:-1].split(b",")  # numbers: no comma inside one


_BOOLEANS = (b"false", b"true")
# One run as orjson writes it as an item of a list that is a field of the top-level object (INDENT_2).
_TEMPLATE = b"{\n      " + b",\n      ".join(b'"%s": %%s' % name.encode() for name in FIELDS) + b"\n    }"
