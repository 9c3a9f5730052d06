"""Fuzzing the seed-format importer: any mutation of a valid file parses or raises "
"ImportInputError, nothing else."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import seed_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailscope.importers import ImportInputError
from tailscope.importers.fast_csv import FastReaderFallback
from tailscope.importers.perfcounts import _perfscan, _read_fast, _read_lines, _read_native, parse


def fast_readers() -> list[Callable[[Path], object]]:
    """The pyarrow reader, and the native scanner when libtailscope_perfscan.so is built."""
    lib = _perfscan()
    readers: list[Callable[[Path], object]] = [_read_fast]
    if lib is not None:

        def native(path: Path) -> object:
            return _read_native(path, lib)

        native.__name__ = "native scanner"
        readers.append(native)
    return readers


VALID = seed_file.big_text(3, cpus=2, chas=2, channels=1)
LINES = VALID.splitlines()

_tokens = st.sampled_from(
    ["[", "]", '"', "=", " = ", "0x", "-", "1e5", "nan", "\n", "\t", "[0]", '["X"]', "tsc", "\x00", "é",
     "\ufffd",
     "core_counts", "[99999999999999999999]", "0xfffffffffffffffffff", "--", "IA32_X[1]"]
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["insert", "delete_line", "swap", "truncate", "replace_chars", "dup"]))
        i = draw(st.integers(0, len(lines) - 1)) if lines else 0
        if kind == "insert":
            lines.insert(i, draw(st.text(alphabet=st.characters(), max_size=30)) + draw(_tokens))
        elif kind == "delete_line" and lines:
            del lines[i]
        elif kind == "swap" and len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "truncate":
            lines = lines[:i]
        elif kind == "replace_chars" and lines:
            line = lines[i]
            k = draw(st.integers(0, max(0, len(line) - 1)))
            lines[i] = line[:k] + draw(_tokens) + line[k + draw(st.integers(0, 3)) :]
        elif kind == "dup" and lines:
            lines.insert(i, lines[i])
    data = ("\n".join(lines)).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += b"\n"
    if draw(st.booleans()) and data:
        cut = draw(st.integers(0, len(data)))
        data = data[:cut]
    return data


@settings(
    max_examples=int(os.environ.get("TAILSCOPE_FUZZ_EXAMPLES", "500")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=mutated())
def test_mutations_parse_or_raise_the_documented_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.perfcounts.lua"
    path.write_bytes(data)
    try:
        reference = _read_lines(path)
    except ImportInputError as exc:
        assert str(path) in str(exc)
        reference = None
    for reader in fast_readers():
        try:
            fast = reader(path)
        except FastReaderFallback:
            continue  # the line reader takes over (and gave `reference` above)
        except ImportInputError as exc:
            assert reference is None, f"{reader.__name__} refused what the line reader accepts: {exc}"
            continue
        assert reference is not None, f"{reader.__name__} accepted what the line reader refuses"
        assert [k.text for k in fast.keys] == [k.text for k in reference.keys]
        assert np.array_equal(fast.key_codes, reference.key_codes)
        assert np.array_equal(fast.samples, reference.samples)
        assert [int(v) for v in fast.values] == [int(v) for v in reference.values]
        assert fast.header == reference.header
    try:
        parse(path)
    except ImportInputError:
        assert reference is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400))
def test_random_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "noise.lua"
    path.write_bytes(data)
    for reader in (parse, _read_lines):
        with contextlib.suppress(ImportInputError):
            reader(path)


def test_fast_reader_handles_the_valid_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "ok.perfcounts.lua"
    path.write_text(VALID)
    assert _read_fast(path).n_samples == 3


# perf-csv, likwid-csv and iterations: tests/importers/test_fuzz_every_importer.py
