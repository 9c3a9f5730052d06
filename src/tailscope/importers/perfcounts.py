"""The seed sampler's text output (`<host>.perfcounts.lua`, seed 000 II.B) into the `samples` table.

One assignment per line (notes/seed-formats.md):
- header scalars and header arrays: `TSC_ratio = 21`, `Reference_WallTime = 1532379481.075971`,
  `IA32_FIXED_CTR_CTRL[5] = 0x333` (an all-capitals array name is configuration, not a sample);
- samples: `name[i][j]...["EVENT NAME"][sample] = value`, the last index always the sample number. Values
  are raw cumulative register contents, decimal or hexadecimal (`0x88390800`), never deltas.

Arrays and where their rows go (`ARRAYS`; pmu, unit, event of the samples table, and the counter width that
the metrics use for wraparound):
- `tsc[s]` -> the samples' `tsc` column; `walltime[0][s]` seconds + `walltime[1][s]` microseconds -> `t_ns`
  (CLOCK_REALTIME). Without walltime,
  t_ns = Reference_WallTime + (tsc - Reference_TSC) / (TSC_ratio x 100 MHz).
- per logical CPU (unit = CPU): `core_fixed_counts[cpu]["EV"]` (pmu `cpu_fixed`), `core_counts[cpu]["EV"]`
  (pmu `cpu`), 48 bits; `aperf[cpu]`, `mperf[cpu]` (pmu `msr`, event = array name, 64 bits).
- per uncore box (pmu `uncore_<box>:<socket>`, unit = box): `cha_counts[s][cha]["EV"]`,
  `imc_counts[s][channel]["EV"]`, `ha_counts`, `qpi_counts`, `upi_counts`, 48 bits.
- per socket (unit = socket): `pcu_counts[s]["EV"]` (pmu `uncore_pcu`), `ubox_uclk[s]` (pmu `uncore_ubox`),
  48 bits; `rapl_pkg_energy`, `rapl_dram_energy`, `rapl_pkg_throttled`, `smi_count` (pmu `power`/`package`,
  32 bits); `pkg_temperature`, `pkg_therm_status`, `pkg_core_perf_limit_reasons`,
  `pkg_ring_perf_limit_reasons` (pmu `package`, gauges: no width, no deltas). Socket arrays without an event
  index use the array name as event.
- `other_counts["pmu"][unit]["EV"][s]`: any other sample (unit -1 = none); written by `export perfcounts` for
  samples that did not come from this format, so every samples row survives a round trip.

Arrays this importer does not know (the real sampler also writes `ib_recv_bytes[s]`, `ib_xmit_bytes[s]`,
`iio_<port>_{in,out}_bytes[socket][s]`) are stored as they are under pmu `perfcounts:unknown` (event = the
array name, unit = its last index before the sample) and named in the import's result line; never refused.

Checks (every error names file:line and what was expected): line syntax, index layout per known
array, non-numeric or out-of-range values (a 48-bit counter above 2^48 - 1), duplicate assignments, sample
numbers that skip, and samples that lack counters other samples have (a truncated file). The header names no
samples' layout; the file's own first sample does.

Speed: a valid file is scanned by native/importers/perfscan.c (libtailscope_perfscan.so, two threads on big
files; ctypes releases the GIL), or, without that library, by pyarrow's CSV reader (`=` as the delimiter) and
vectorised string kernels; either way only the ~1,100 distinct series names are parsed in Python. Anything
unusual (comments, a bad line, a failed check) falls back to the line-by-line reader, which is the reference
and the one that produces the error message. `import_perfcounts` streams: the file is mapped and scanned
STREAM_BLOCK bytes at a time, its sha256 is taken in a thread meanwhile, and the command loads numpy and
pyarrow only (no pandas, DuckDB, pyarrow.dataset or pyarrow.compute: `pa.array` and `to_numpy` would import
pandas, so Arrow arrays are made from their buffers here).
"""

from __future__ import annotations

import ctypes
import functools
import math
import mmap
import os
import queue
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tailscope.counters.perfcounts_format import ARRAYS, SOURCE
from tailscope.importers import BOM, ImportInputError, digest_in_background, stored_samples_by_node
from tailscope.importers.fast_csv import FastReaderFallback
from tailscope.importers.rows import check_node
from tailscope.native import NativeMissingError, native_library
from tailscope.store.load import load_into
from tailscope.store.manifest import Manifest
from tailscope.store.schema import TABLES

if TYPE_CHECKING:
    from tailscope.store.load import Transaction

FORMAT = "perfcounts"
CHUNK_ROWS = 1 << 20  # rows per written shard
MAX_LINE = 65536  # characters; the seed's longest lines are ~100
TSC_REF_HZ = 100e6  # TSC_ratio x 100 MHz = TSC frequency (seed: TSC GHz = TSC_ratio x 0.1)


_LAYOUT_TEXT = {"cpu": "[cpu]", "socket": "[socket]", "box": "[box]", "event": '["EVENT"]', "part": "[0|1]"}
_LAYOUT_TEXT.update({"pmu": '["pmu"]', "unit": "[unit]"})

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_INDEX = r'\[(?:[0-9]+|-1|"[^"\[\]]*")\]'
_LINE = re.compile(rf"^({_NAME})((?:{_INDEX})*)\s*=\s*(\S+)$")
_KEY = re.compile(rf"^({_NAME})((?:{_INDEX})*)$")
_EXPECT = {n: "".join(_LAYOUT_TEXT[k] for k in spec.layout) + "[sample]" for n, spec in ARRAYS.items()}
_INDEX_ITEM = re.compile(r'\[(?:([0-9]+|-1)|"([^"\[\]]*)")\]')
_SAMPLE_LHS = rf"^(?P<key>{_NAME}(?:{_INDEX})*)\[(?P<sample>[0-9]+)\]$"
_HEADER_ARRAY = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SAMPLE_VALUE = r"^(?:[0-9]+|0[xX][0-9a-fA-F]+)$"
_DEC = re.compile(r"^[0-9]+$")
_HEX = re.compile(r"^0[xX][0-9a-fA-F]+$")
_MAX_SAMPLE = 2**62
_MAX_SECONDS = 9_000_000_000  # t_ns (int64) holds seconds since 1970 below ~9.2e9
UNKNOWN_PMU = "perfcounts:unknown"  # arrays this importer does not know are stored under this pmu


@dataclass(frozen=True, slots=True)  # slots: a third of the time to make one (1,300 per file)
class SeriesKey:
    """One series of the file (an array element without its sample index)."""

    text: str  # as written, e.g. cha_counts[0][5]["SF_EVICTION.M_STATE"]
    array: str
    pmu: str
    unit: int | None
    event: str
    width: int | None


@dataclass
class ParsedPerfcounts:
    path: Path
    header: dict[str, int | float] = field(default_factory=dict)
    keys: list[SeriesKey] = field(default_factory=list)
    key_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    samples: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    values: list[int] | np.ndarray = field(default_factory=list)  # exact ints (uint64 array or Python ints)
    sample_numbers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted, contiguous
    tsc: np.ndarray | None = None  # per sample number, int64
    t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def n_samples(self) -> int:
        return len(self.sample_numbers)


# --- series keys ------------------------------------------------------------------------------------------
_FAST_INDEX = {"cpu": "([0-9]+)", "box": "([0-9]+)", "socket": "([0-9]+)", "unit": "([0-9]+|-1)",
               "part": "([01])", "event": '"([^"\\[\\]]+)"', "pmu": '"([^"\\[\\]]*)"'}  # fmt: skip
# per known array: its indices' pattern when they are as its layout wants (else parse_key's checks name why),
# and which of them is the event, the pmu, the socket and the unit (-1: none)
_FAST_KEY = {n: re.compile("".join(rf"\[{_FAST_INDEX[k]}\]" for k in s.layout)) for n, s in ARRAYS.items()}


def _places(layout: tuple[str, ...]) -> tuple[int, int, int, int]:
    def at(*kinds: str) -> int:
        return max((i for i, k in enumerate(layout) if k in kinds), default=-1)

    unit = at("cpu", "box", "unit", "part")
    return at("event"), at("pmu"), at("socket"), unit if unit >= 0 else at("socket")


_PLACES = {n: _places(s.layout) for n, s in ARRAYS.items()}


_KNOWN_KEYS: dict[str, SeriesKey] = {}  # series name -> its key: a job's sampler files share their names
KNOWN_KEYS_MAX = 1 << 16


def parse_key(text: str, where: str) -> SeriesKey:
    """A series name (`cha_counts[0][5]["EV"]`) checked against its array's layout; a name already checked
    (by an earlier file of the same import: every node of a job samples the same ~1,300 series) is not parsed
    again (7 ms of a 6 MB file's 30)."""
    key = _KNOWN_KEYS.get(text)
    if key is None:
        key = _parse_key(text, where)
        if len(_KNOWN_KEYS) >= KNOWN_KEYS_MAX:
            _KNOWN_KEYS.clear()
        _KNOWN_KEYS[text] = key
    return key


def _parse_key(text: str, where: str) -> SeriesKey:
    cut = text.find("[")
    spec = ARRAYS.get(text[:cut] if cut >= 0 else text)
    fast = _FAST_KEY[spec.name].fullmatch(text, max(cut, 0)) if spec is not None and cut >= 0 else None
    if fast is not None:  # the layout is right: only where each index goes is left
        groups = fast.groups()
        event_at, pmu_at, socket_at, unit_at = _PLACES[spec.name]
        pmu = groups[pmu_at] if pmu_at >= 0 else spec.pmu
        if "{socket}" in pmu:
            pmu = pmu.replace("{socket}", str(int(groups[socket_at])) if socket_at >= 0 else "0")
        value = groups[unit_at] if unit_at >= 0 else "-1"
        return SeriesKey(
            text,
            spec.name,
            pmu,
            None if value == "-1" else int(value),
            groups[event_at] if event_at >= 0 else spec.name,
            spec.width,
        )
    match = _KEY.match(text)
    if match is None:
        raise ImportInputError(f"{where}: {text!r} is not name[index]... (expected e.g. tsc[0] = 123)")
    name = match.group(1)
    indices: list[int | str] = [
        int(m.group(1)) if m.group(1) is not None else str(m.group(2))
        for m in _INDEX_ITEM.finditer(match.group(2))
    ]
    spec = ARRAYS.get(name)
    if spec is None:
        return _unknown_key(text, name, indices, where)
    expect = _EXPECT[name]
    if len(indices) != len(spec.layout):
        raise ImportInputError(f"{where}: {name} takes {name}{expect}, got {text}[sample]")
    unit: int | None = None
    socket = 0
    event = name
    pmu = spec.pmu
    for kind, value in zip(spec.layout, indices, strict=True):
        is_text = kind in ("event", "pmu")
        if is_text != isinstance(value, str) or (not is_text and value == -1 and kind != "unit"):
            raise ImportInputError(f"{where}: {name} takes {name}{expect}, got {text}[sample]")
        if kind == "event":
            if not value:
                raise ImportInputError(f"{where}: empty event name in {text}")
            event = str(value)
        elif kind == "pmu":
            pmu = str(value)
        elif kind == "part":
            if value not in (0, 1):
                raise ImportInputError(
                    f"{where}: walltime[0] holds seconds, walltime[1] microseconds; got {text}"
                )
            unit = int(value)
        elif kind == "socket":
            socket = int(value)
            unit = socket if "box" not in spec.layout else unit
        else:  # cpu, box, unit
            unit = None if value == -1 else int(value)
    return SeriesKey(text, name, pmu.replace("{socket}", str(socket)), unit, event, spec.width)


def _unknown_key(text: str, name: str, indices: list[int | str], where: str) -> SeriesKey:
    """An array this importer does not know (the sampler's ib_recv_bytes[s], iio_<port>_in_bytes[socket][s],
    ...): stored as it is, source-tagged with pmu UNKNOWN_PMU, unit = its last integer index, event = the
    array name with any other indices; 64-bit counts. Never interpreted by `metrics`; the import says so."""
    numbers = [i for i in indices if isinstance(i, int)]
    if any(i < 0 for i in numbers):
        raise ImportInputError(f"{where}: negative index in {text} (expected indices >= 0)")
    unit = numbers[-1] if numbers else None
    if unit is not None and unit > 2**31 - 1:
        raise ImportInputError(f"{where}: index {unit} in {text} is above {2**31 - 1}")
    rest = list(indices)
    if unit is not None:
        del rest[len(rest) - 1 - rest[::-1].index(unit)]
    event = name + "".join(f'["{i}"]' if isinstance(i, str) else f"[{i}]" for i in rest)
    return SeriesKey(text, name, UNKNOWN_PMU, unit, event, 64)


def _header_value(text: str, where: str) -> int | float:
    if _DEC.match(text):
        return int(text)
    if _HEX.match(text):
        return int(text, 16)
    try:
        value = float(text)
    except ValueError:
        raise ImportInputError(f"{where}: header value {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ImportInputError(f"{where}: header value {text!r} is not a finite number")
    return value


def _sample_value(text: str, where: str, key: SeriesKey) -> int:
    if _DEC.match(text):
        value = int(text)
    elif _HEX.match(text):
        value = int(text, 16)
    else:
        raise ImportInputError(
            f"{where}: value {text!r} of {key.text} is not a non-negative integer (decimal or 0x hex)"
        )
    _check_range(value, key, where)
    return value


def _check_range(value: int, key: SeriesKey, where: str) -> None:
    limit = 2 ** (key.width or 64)
    if value >= limit:
        raise ImportInputError(
            f"{where}: value {value} of {key.text} does not fit its {key.width or 64}-bit register"
        )


# --- the line reader (reference) --------------------------------------------------------------------------
def _read_lines(path: Path) -> ParsedPerfcounts:
    parsed = ParsedPerfcounts(path)
    keys: dict[str, int] = {}
    codes: list[int] = []
    samples: list[int] = []
    values: list[int] = []
    lines: list[int] = []
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the `with` below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if len(raw) > MAX_LINE:
                raise ImportInputError(f"{where}: line longer than {MAX_LINE} characters (not this format)")
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise ImportInputError(f"{where}: not UTF-8 text ({exc.reason})") from None
            if number == 1:
                line = line.removeprefix(BOM)
            if not line or line.startswith("--"):
                continue
            match = _LINE.match(line)
            if match is None:
                hint = " (file truncated?)" if not raw.endswith(b"\n") else ""
                raise ImportInputError(
                    f"{where}: expected `name[index]... = value` (e.g. "
                    'imc_counts[1][0]["ACT.ALL"][27] = 87368924)'
                    f"{hint}; got {line[:80]!r}"
                )
            name, index_text, value_text = match.groups()
            if not index_text or _HEADER_ARRAY.match(name):
                lhs = name + index_text
                if lhs in parsed.header:
                    raise ImportInputError(f"{where}: {lhs} assigned twice")
                parsed.header[lhs] = _header_value(value_text, where)
                continue
            last = index_text.rfind("[")
            sample_text = index_text[last + 1 : -1]
            if not _DEC.match(sample_text):
                raise ImportInputError(
                    f"{where}: the last index must be the sample number, got [{sample_text}]"
                )
            key_text = name + index_text[:last]
            code = keys.get(key_text)
            if code is None:
                code = keys[key_text] = len(parsed.keys)
                parsed.keys.append(parse_key(key_text, where))
            sample = int(sample_text)
            if sample >= _MAX_SAMPLE:
                raise ImportInputError(f"{where}: sample number {sample} out of range")
            values.append(_sample_value(value_text, where, parsed.keys[code]))
            codes.append(code)
            samples.append(sample)
            lines.append(number)
    parsed.key_codes = np.asarray(codes, dtype=np.int64)
    parsed.samples = np.asarray(samples, dtype=np.int64)
    parsed.values = values
    _check_structure(parsed, np.asarray(lines, dtype=np.int64))
    return parsed


# --- the fast reader --------------------------------------------------------------------------------------
def _read_fast(path: Path) -> ParsedPerfcounts:
    import pyarrow.compute as pc  # this reader only (the native scanner's path does without: ~20 ms)
    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=["lhs", "rhs"], block_size=1 << 23),
            parse_options=pcsv.ParseOptions(delimiter="=", quote_char=False, escape_char=False),
            convert_options=pcsv.ConvertOptions(column_types={"lhs": pa.string(), "rhs": pa.string()}),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError) as exc:
        raise FastReaderFallback(str(exc)) from None
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot read ({exc})") from None
    if table["lhs"].null_count or table["rhs"].null_count:
        raise FastReaderFallback("null")
    lhs = pc.ascii_trim_whitespace(table["lhs"])
    rhs = pc.ascii_trim_whitespace(table["rhs"])
    if len(lhs) and pc.max(pc.binary_length(lhs)).as_py() > MAX_LINE:
        raise FastReaderFallback("long")
    parsed = ParsedPerfcounts(path)
    bracket = pc.ends_with(lhs, "]")
    scalars = pc.invert(bracket)
    for name, value in zip(
        pc.filter(lhs, scalars).to_pylist(), pc.filter(rhs, scalars).to_pylist(), strict=True
    ):
        _fast_header(parsed, name, value, path)
    lhs_s = pc.filter(lhs, bracket)
    rhs_s = pc.filter(rhs, bracket)
    parts = pc.split_pattern(lhs_s, "[", max_splits=1, reverse=True)
    if len(parts) and pc.min(pc.list_value_length(parts)).as_py() != 2:
        raise FastReaderFallback("no [ before ]")
    key_dict = pc.dictionary_encode(pc.list_element(parts, 0)).combine_chunks()
    sample_text = pc.utf8_slice_codeunits(pc.list_element(parts, 1), 0, -1)
    if len(sample_text) and pc.any(pc.match_substring(sample_text, "x", ignore_case=True)).as_py():
        raise FastReaderFallback("hex sample")
    try:
        sample = pc.cast(sample_text, pa.int64()).to_numpy()
        values = pc.cast(rhs_s, pa.uint64()).to_numpy()
    except pa.ArrowInvalid:
        raise FastReaderFallback("number") from None
    codes = key_dict.indices.to_numpy().astype(np.int64)
    is_header = np.zeros(len(key_dict.dictionary), dtype=bool)
    keys: list[SeriesKey] = []
    for i, text in enumerate(key_dict.dictionary.to_pylist()):
        if _HEADER_ARRAY.match(text.split("[", 1)[0]):
            is_header[i] = True
            keys.append(SeriesKey(text, "", "", None, "", None))
            continue
        try:
            keys.append(parse_key(text, str(path)))
        except ImportInputError:
            raise FastReaderFallback("key") from None
    if is_header.any():
        mask = pa.array(is_header[codes])
        names = pc.filter(lhs_s, mask).to_pylist()
        texts = pc.filter(rhs_s, mask).to_pylist()
        for name, value in zip(names, texts, strict=True):
            _fast_header(parsed, name, value, path)
        keep = np.flatnonzero(~is_header[codes])
        remap = np.cumsum(~is_header) - 1
        codes, sample, values = remap[codes[keep]], sample[keep], values[keep]
        keys = [k for k, h in zip(keys, is_header, strict=True) if not h]
    return _finish(parsed, keys, codes, sample, values)


def _finish(
    parsed: ParsedPerfcounts, keys: list[SeriesKey], codes: np.ndarray, sample: np.ndarray, values: np.ndarray
) -> ParsedPerfcounts:
    """The checks both fast readers share: sample range, register widths, structure (else the fallback)."""
    if len(sample) and (sample.min() < 0 or sample.max() >= _MAX_SAMPLE):
        raise FastReaderFallback("sample")
    widths = np.asarray([64 if k.width is None else k.width for k in keys] or [64], dtype=np.uint64)
    row_width = widths[codes] if len(codes) else np.zeros(0, np.uint64)
    narrow = row_width < 64
    if narrow.any() and (values[narrow] >> row_width[narrow]).any():
        raise FastReaderFallback("width")
    parsed.keys, parsed.key_codes, parsed.samples, parsed.values = keys, codes, sample, values
    _check_structure(parsed, None)
    return parsed


# --- the native reader (native/importers/perfscan.c) --------------------------------------------------------
PERFSCAN_LIB = "tailscope_perfscan"
PERFSCAN_ABI = 1  # TS_PERFSCAN_ABI
_NATIVE_MIN_CHUNK = 4 << 20  # below this one thread scans the whole file


@functools.cache
def _perfscan() -> ctypes.CDLL | None:
    """The scanner library, or None (not built): the pyarrow reader is used then."""
    try:
        lib = ctypes.CDLL(str(native_library(PERFSCAN_LIB)))
    except (NativeMissingError, OSError):
        return None
    lib.ts_perfscan_abi.restype = ctypes.c_int
    lib.ts_perfscan_abi.argtypes = []
    if lib.ts_perfscan_abi() != PERFSCAN_ABI:
        return None
    p = ctypes.c_void_p
    lib.ts_perfscan.restype = ctypes.c_int64
    lib.ts_perfscan.argtypes = [p, ctypes.c_size_t, p, p, p, ctypes.c_size_t, p, p, ctypes.c_size_t, p, p, p,
                                ctypes.c_size_t, p, p]  # fmt: skip
    return lib


def _scan_chunk(lib: ctypes.CDLL, base: int, data: Any, start: int, end: int) -> tuple[Any, ...]:
    """One call of the scanner over data[start:end]; output arrays grow (and the call repeats) when full."""
    rows_cap, hdr_cap = (end - start) // 24 + 1024, 4096
    while True:
        key = np.empty(rows_cap, np.int32)
        sample = np.empty(rows_cap, np.int64)
        value = np.empty(rows_cap, np.uint64)
        max_keys = min(rows_cap, 1 << 22)
        key_off = np.empty(max_keys, np.int64)
        key_len = np.empty(max_keys, np.int32)
        hdr_off = np.empty(hdr_cap, np.int64)
        hdr_len = np.empty(hdr_cap, np.int32)
        n_keys, n_hdr, bad = ctypes.c_size_t(), ctypes.c_size_t(), ctypes.c_int64()
        rows = lib.ts_perfscan(
            base + start, end - start, key.ctypes.data, sample.ctypes.data, value.ctypes.data, rows_cap,
            key_off.ctypes.data, key_len.ctypes.data, max_keys, ctypes.byref(n_keys), hdr_off.ctypes.data,
            hdr_len.ctypes.data, hdr_cap, ctypes.byref(n_hdr), ctypes.byref(bad),
        )  # fmt: skip
        if rows != -2:
            break
        rows_cap, hdr_cap = rows_cap * 2, hdr_cap * 8
    if rows < 0:
        return (None,)
    texts = [
        data[start + o : start + o + n].decode("ascii")
        for o, n in zip(key_off[: n_keys.value].tolist(), key_len[: n_keys.value].tolist(), strict=True)
    ]
    headers = [
        data[start + o : start + o + n].decode("ascii")
        for o, n in zip(hdr_off[: n_hdr.value].tolist(), hdr_len[: n_hdr.value].tolist(), strict=True)
    ]
    return key[:rows], sample[:rows], value[:rows], texts, headers


def _read_native(path: Path, lib: ctypes.CDLL) -> ParsedPerfcounts:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if size else None
    except (OSError, ValueError) as exc:
        raise ImportInputError(f"{path}: cannot read ({exc})") from None
    if mm is None:
        return _scan_parts(path, [_scan_chunk(lib, 0, b"", 0, 0)])
    view = ctypes.c_char.from_buffer(mm)  # the mapping's address, no copy
    try:
        base = ctypes.addressof(view)
        bounds = [0, size]
        if size >= 2 * _NATIVE_MIN_CHUNK and (os.cpu_count() or 1) > 1:
            cut = mm.find(b"\n", size // 2)
            if cut > 0:
                bounds = [0, cut + 1, size]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(bounds) - 1) as pool:  # ctypes releases the GIL
            parts = list(
                pool.map(
                    lambda i: _scan_chunk(lib, base, mm, bounds[i], bounds[i + 1]), range(len(bounds) - 1)
                )
            )
    finally:
        del view
        mm.close()
    return _scan_parts(path, parts)


def _scan_parts(path: Path, parts: list[tuple[Any, ...]]) -> ParsedPerfcounts:
    if any(part[0] is None for part in parts):
        raise FastReaderFallback("native")
    parsed = ParsedPerfcounts(path)
    texts: dict[str, int] = {}
    codes_all, samples_all, values_all = [], [], []
    for key, sample, value, chunk_texts, headers in parts:
        for line in headers:
            m = _LINE.match(line.strip())
            if m is None:
                raise FastReaderFallback("header")
            _fast_header(parsed, m.group(1) + m.group(2), m.group(3), path)
        remap = np.asarray([texts.setdefault(t, len(texts)) for t in chunk_texts] or [0], dtype=np.int64)
        codes_all.append(remap[key] if len(key) else np.zeros(0, np.int64))
        samples_all.append(sample)
        values_all.append(value)
    try:
        keys = [parse_key(t, str(path)) for t in texts]
    except ImportInputError:
        raise FastReaderFallback("key") from None
    return _finish(
        parsed, keys, np.concatenate(codes_all), np.concatenate(samples_all), np.concatenate(values_all)
    )


def _fast_header(parsed: ParsedPerfcounts, name: str, value: str, path: Path) -> None:
    if _LINE.match(f"{name} = {value}") is None or name in parsed.header:
        raise FastReaderFallback("header")
    try:
        parsed.header[name] = _header_value(value, str(path))
    except ImportInputError:
        raise FastReaderFallback("header value") from None


# --- structure ----------------------------------------------------------------------------------------------
def _check_structure(parsed: ParsedPerfcounts, lines: np.ndarray | None) -> None:
    """Duplicates, contiguous sample numbers, every sample complete; then the per-sample tsc and t_ns."""
    path = parsed.path

    def line_of(row: int) -> str:
        if lines is None:
            raise FastReaderFallback("structure")
        return f"{path}:{int(lines[row])}"

    if len(parsed.samples) == 0:
        raise ImportInputError(f"{path}: no samples (expected lines like tsc[0] = 25370245187777968)")
    codes, samples = parsed.key_codes, parsed.samples
    first, last = int(samples.min()), int(samples.max())
    span = last - first + 1
    n_keys = len(parsed.keys)
    present = np.zeros(span, dtype=bool)
    present[samples - first] = True
    if not present.all():
        missing = int(np.flatnonzero(~present)[0]) + first
        row = int(np.flatnonzero(samples > missing)[0])
        raise ImportInputError(
            f"{line_of(row)}: sample numbers skip from {missing - 1} to {int(samples[row])} "
            f"(sample {missing} is missing; expected consecutive sample numbers)"
        )
    flat = codes * span + (samples - first)
    counts = np.bincount(flat, minlength=n_keys * span)
    if (counts > 1).any():
        twice = np.flatnonzero(counts[flat] > 1)  # rows of repeated (series, sample) cells, file order
        row = int(twice[flat[twice] == flat[twice[0]]][1])  # the second assignment of the first one
        raise ImportInputError(
            f"{line_of(row)}: {parsed.keys[int(codes[row])].text}[{int(samples[row])}] assigned twice "
            "(inconsistent sample numbering)"
        )
    per_sample = np.bincount(samples - first, minlength=span)
    short = np.flatnonzero(per_sample != n_keys)
    if len(short):
        bad = int(short[0]) + first
        have = set(codes[samples == bad].tolist())
        lacking = next(k for i, k in enumerate(parsed.keys) if i not in have)
        rows = np.flatnonzero(samples == bad)
        row = int(rows[-1])
        truncated = " (file truncated?)" if bad == last else ""
        raise ImportInputError(
            f"{line_of(row)}: sample {bad} has {int(per_sample[bad - first])} of the {n_keys} "
            "series the file "
            f"holds (no {lacking.text}[{bad}]){truncated}"
        )
    parsed.sample_numbers = np.arange(first, last + 1, dtype=np.int64)
    by_array = {k.array: i for i, k in enumerate(parsed.keys) if k.array in ("tsc",)}
    value_array = np.asarray(parsed.values, dtype=object if isinstance(parsed.values, list) else np.uint64)

    def series(code: int) -> np.ndarray:
        rows = np.flatnonzero(codes == code)
        out = np.zeros(span, dtype=np.int64)
        out[samples[rows] - first] = value_array[rows].astype(np.int64)
        return out

    parsed.tsc = series(by_array["tsc"]) if "tsc" in by_array else None
    wall = {k.unit: i for i, k in enumerate(parsed.keys) if k.array == "walltime"}
    if 0 in wall:
        micros = series(wall[1]) if 1 in wall else np.zeros(span, dtype=np.int64)
        seconds = series(wall[0])
        if seconds.max() >= _MAX_SECONDS or micros.max() >= _MAX_SECONDS:
            raise ImportInputError(
                f"{path}: walltime[0] of sample {int(np.argmax(seconds)) + first} is beyond year 2262 (the "
                "store keeps times as 64-bit nanoseconds; expected seconds since 1970)"
            )
        parsed.t_ns = seconds * 1_000_000_000 + micros * 1000
    elif (
        parsed.tsc is not None
        and {"TSC_ratio", "Reference_TSC", "Reference_WallTime"} <= parsed.header.keys()
    ):
        hz = float(parsed.header["TSC_ratio"]) * TSC_REF_HZ
        if not hz > 0:
            raise ImportInputError(f"{path}: TSC_ratio must be > 0")
        reference = parsed.header["Reference_TSC"]
        if not isinstance(reference, int) or not 0 <= reference < 2**63:
            raise ImportInputError(f"{path}: Reference_TSC {reference} is not a TSC value (0 <= TSC < 2^63)")
        offset = (parsed.tsc - reference) / hz
        with np.errstate(over="ignore", invalid="ignore"):
            stamps = (float(parsed.header["Reference_WallTime"]) + offset) * 1e9
        if not (np.isfinite(stamps).all() and np.abs(stamps).max() < 2**63 - 2**11):
            raise ImportInputError(
                f"{path}: Reference_WallTime with the samples' tsc gives times beyond year 2262 (expected "
                "seconds since 1970)"
            )
        parsed.t_ns = np.round(stamps).astype(np.int64)
    else:
        raise ImportInputError(
            f"{path}: cannot time the samples: no walltime[0][s] lines and no tsc[s] with TSC_ratio, "
            "Reference_TSC and Reference_WallTime header lines"
        )


def parse(path: Path) -> ParsedPerfcounts:
    """Parse and check the whole file; raises ImportInputError naming file:line."""
    path = Path(path)
    lib = _perfscan()
    try:
        return _read_native(path, lib) if lib is not None else _read_fast(path)
    except FastReaderFallback:
        return _read_lines(path)


# --- into the store -----------------------------------------------------------------------------------------
def samples_table(parsed: ParsedPerfcounts, node: str, source: str = SOURCE) -> pa.Table:
    """Rows of the samples table: every series except tsc and walltime, in (sample, series) order.

    `_check_structure` left a full grid (every sample holds each series once), so the rows are that grid:
    each value goes to its cell by position (no sort), and the per-series columns (pmu, unit, event) are
    one sample's arrays repeated (built once, not per row; no pa.array, no pyarrow.compute)."""
    keep = np.flatnonzero([k.array not in ("tsc", "walltime") for k in parsed.keys])
    kept = [parsed.keys[int(i)] for i in keep]
    n_samples, n_keys = parsed.n_samples, len(parsed.keys)
    first = int(parsed.sample_numbers[0]) if n_samples else 0
    grid = np.empty(n_samples * n_keys, dtype=np.float64)
    if isinstance(parsed.values, list):
        values = np.asarray([float(v) for v in parsed.values], dtype=np.float64)
    else:
        values = parsed.values.astype(np.float64)
    grid[(parsed.samples - first) * n_keys + parsed.key_codes] = values
    value = grid.reshape(n_samples, n_keys)[:, keep].reshape(-1)
    per_sample = len(kept)

    def repeated(one: pa.Array) -> pa.ChunkedArray:
        return pa.chunked_array([one] * n_samples if per_sample else [], one.type)

    def per_row(of_sample: np.ndarray) -> pa.Array:
        return _arrow_numbers(np.repeat(of_sample, per_sample), pa.int64())

    n = len(value)
    table = pa.Table.from_arrays(
        [
            repeated(_arrow_constant(node, per_sample)),
            per_row(parsed.sample_numbers),
            per_row(parsed.t_ns),
            per_row(parsed.tsc) if parsed.tsc is not None else pa.nulls(n, pa.int64()),
            repeated(_arrow_constant(source, per_sample)),
            repeated(_arrow_strings([k.pmu for k in kept])),
            repeated(_arrow_units([k.unit for k in kept])),
            repeated(_arrow_strings([k.event for k in kept])),
            _arrow_numbers(value, pa.float64()),
        ],
        schema=TABLES["samples"].schema,
    )
    # one chunk per column: 0.1 ms of copying, against 0.5 ms each time the store sizes a chunked table
    # (Table.nbytes walks every chunk) and a slower Parquet write
    return table.combine_chunks()


# Arrow arrays from their buffers: `pa.array` (any argument, even a list) imports pandas when it is installed
# (0.4 s and 100 MiB), which the import command never needs.
def _arrow_numbers(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    data = np.ascontiguousarray(values, dtype=kind.to_pandas_dtype())
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])


def _arrow_strings(words: list[str]) -> pa.Array:
    encoded = [w.encode() for w in words]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ImportInputError("the series names of one sample hold over 2 GiB (not this format)")
    return pa.Array.from_buffers(
        pa.string(),
        len(encoded),
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))],
    )


def _arrow_constant(word: str, n: int) -> pa.Array:
    encoded = word.encode()
    offsets = np.arange(n + 1, dtype=np.int64) * len(encoded)
    if n and offsets[-1] >= 2**31:
        raise ImportInputError("the series names of one sample hold over 2 GiB (not this format)")
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(encoded * n)]
    )


def _arrow_units(units: list[int | None]) -> pa.Array:
    valid = np.asarray([u is not None for u in units], dtype=bool)
    data = np.asarray([0 if u is None else u for u in units], dtype=np.int32)
    if valid.all():
        return pa.Array.from_buffers(pa.int32(), len(data), [None, pa.py_buffer(data)])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.int32(), len(data), [bitmap, pa.py_buffer(data)], null_count=int((~valid).sum())
    )


def node_from_path(path: Path) -> str:
    """`c591-803.perfcounts.lua` -> `c591-803` (the sampler names its output after the host)."""
    name = Path(path).name
    for suffix in (".perfcounts.lua", ".perfcounts", ".lua", ".txt"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


STREAM_BLOCK = 8 << 20  # bytes scanned at a time (4 MiB: a 6 MB file in two shards, 2-3 ms more)


@dataclass
class StreamSummary:
    """What a streamed import saw: the header, the series, the sample count."""

    header: dict[str, int | float] = field(default_factory=dict)
    keys: list[SeriesKey] = field(default_factory=list)
    samples: int = 0
    rows: int = 0


def stream_tables(
    path: Path, node: str, source: str, summary: StreamSummary, block: int = STREAM_BLOCK
) -> Iterator[pa.Table]:
    """`samples` tables of a file written sample after sample (as the sampler writes it), scanned by the
    native scanner `block` bytes at a time: memory holds one block's rows, never the file. Every check of the
    whole-file readers runs on each block's complete samples (a sample cut by the block's end waits for the
    next block). Anything else (no native scanner, a file not in sample order, a series that appears late, a
    header line after the samples, any error) raises FastReaderFallback: the caller then reads the whole file
    with the reference readers, which also name the error's file:line."""
    lib = _perfscan()
    if lib is None:
        raise FastReaderFallback("no native scanner")
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise ImportInputError(f"{path}: cannot open ({exc.strerror})") from None
    with fh:
        try:  # mapped, not read: no copy, and the pages come from the page cache as they are scanned
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):  # empty, or not a regular file
            raise FastReaderFallback("not mappable") from None
    try:
        yield from _stream_blocks(path, lib, mm, node, source, summary, block)
    except ImportInputError:
        raise FastReaderFallback("error: the whole-file readers name it") from None
    finally:
        mm.close()


def _blocks(mm: mmap.mmap, block: int) -> Iterator[tuple[int, int, bool]]:
    """Whole lines of the mapped file, about `block` bytes at a time: (start, end, whether it is the last
    block). A block's pages leave the mapping when the next block is asked for (they stay in the page cache):
    the process holds about one block of the file, never all of it. Reading each block into a buffer instead
    cost a copy and fresh pages: 4 ms of a 6 MB file's import."""
    size = len(mm)
    start = 0
    while start < size:
        end = min(start + max(block, 1), size)
        if end < size:
            cut = mm.rfind(b"\n", start, end)
            if cut < 0:  # a line longer than the block: to its end
                cut = mm.find(b"\n", end)
            end = size if cut < 0 else cut + 1
        yield start, end, end == size
        first, stop = start - start % mmap.PAGESIZE, end - end % mmap.PAGESIZE
        if stop > first and hasattr(mmap, "MADV_DONTNEED"):
            mm.madvise(mmap.MADV_DONTNEED, first, stop - first)
        start = end


def _stream_blocks(
    path: Path, lib: ctypes.CDLL, mm: mmap.mmap, node: str, source: str, summary: StreamSummary, block: int
) -> Iterator[pa.Table]:
    codes_of: dict[str, int] = {}
    pending: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    next_sample: int | None = None
    scratch = ParsedPerfcounts(path)
    where = str(path)
    for start, end, last in _blocks(mm, block):
        view = ctypes.c_char.from_buffer(mm)  # the mapping's address, no copy
        try:
            part = _scan_chunk(lib, ctypes.addressof(view), mm, start, end)
        finally:
            del view
        if part[0] is None:
            raise FastReaderFallback("scanner")
        key, sample, value, texts, headers = part
        if headers:
            if next_sample is not None:
                raise FastReaderFallback("header after samples were stored")
            for line in headers:
                m = _LINE.match(line.strip())
                if m is None:
                    raise FastReaderFallback("header")
                _fast_header(scratch, m.group(1) + m.group(2), m.group(3), path)
            summary.header = scratch.header
        remap = np.empty(max(1, len(texts)), dtype=np.int64)
        for i, text in enumerate(texts):
            code = codes_of.get(text)
            if code is None:
                if next_sample is not None:
                    raise FastReaderFallback("a series after the first samples")
                try:
                    summary.keys.append(parse_key(text, where))
                except ImportInputError:
                    raise FastReaderFallback("key") from None
                code = codes_of[text] = len(summary.keys) - 1
            remap[i] = code
        codes = remap[key] if len(key) else np.zeros(0, np.int64)
        if pending is not None:
            codes = np.concatenate([pending[0], codes])
            sample = np.concatenate([pending[1], sample])
            value = np.concatenate([pending[2], value])
        if len(sample) and (np.diff(sample) < 0).any():
            raise FastReaderFallback("not in sample order")
        if not last and len(sample):
            cut_at = int(np.searchsorted(sample, sample[-1]))  # the last sample may go on in the next block
            pending = (codes[cut_at:], sample[cut_at:], value[cut_at:])
            codes, sample, value = codes[:cut_at], sample[:cut_at], value[:cut_at]
        else:
            pending = None
        if not len(sample):
            continue
        if next_sample is not None and int(sample[0]) != next_sample:
            raise FastReaderFallback("samples skip between blocks")
        parsed = ParsedPerfcounts(path, header=summary.header)
        _finish(parsed, list(summary.keys), codes, sample, value)
        next_sample = int(sample[-1]) + 1
        summary.samples += parsed.n_samples
        table = samples_table(parsed, node, source)
        summary.rows += table.num_rows
        yield table
    if pending is not None or next_sample is None:
        raise FastReaderFallback("no complete sample")


def import_perfcounts(
    path: Path, campaign_dir: Path, *, node: str | None = None, source: str = SOURCE
) -> dict[str, Any]:
    """Stream `path` into the campaign (whole-file readers when streaming does not apply); refuse samples
    already stored for (node, source)."""
    return import_perfcounts_files([path], campaign_dir, node=node, source=source)[0]


def import_perfcounts_files(
    paths: Sequence[Path], campaign_dir: Path, *, node: str | None = None, source: str = SOURCE
) -> list[dict[str, Any]]:
    """Import several sampler files (one node each: `--node`, or each file's <host>.perfcounts.lua) in one
    transaction: every file is stored, or none (the first bad file names itself and nothing is committed).
    One commit for all of them: the campaign's stored samples and imported files are read once, not once
    per file, and a job's sampler files become visible together."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ImportInputError("import perfcounts: no FILE given")
    if node is not None and len(paths) > 1:
        raise ImportInputError(
            f"--node {node}: one node for {len(paths)} files; leave --node out so that each file's "
            "<host>.perfcounts.lua names its node"
        )
    nodes = [node or check_node(node_from_path(p), f"{p} (the node is the file's name)") for p in paths]
    first_of: dict[str, Path] = {}
    for path, of in zip(paths, nodes, strict=True):
        if of in first_of and path.resolve() == first_of[of].resolve():
            raise ImportInputError(f"{path}: named twice; each file is imported once")
        if of in first_of:
            raise ImportInputError(
                f"{path}: node {of} again (also {first_of[of]}); import one file per node, or one of them "
                "under --node in its own import"
            )
        first_of[of] = path
    label = paths[0].name if len(paths) == 1 else f"{len(paths)} files ({paths[0].name} ..)"
    with load_into(campaign_dir, f"import {FORMAT} {label}", create=True) as load:
        held = stored_samples_by_node(load, source)
        for path, of in zip(paths, nodes, strict=True):
            if held.get(of):
                raise ImportInputError(
                    f"{path}: campaign {load.root} already holds {held[of]} samples of node {of} from "
                    f"{source}; import under another --node"
                )
        ahead = _StreamsAhead(list(zip(paths, nodes, strict=True)), source)
        try:
            return [
                _import_one(load, ahead, index, path, of, source)
                for index, (path, of) in enumerate(zip(paths, nodes, strict=True))
            ]
        finally:
            ahead.close()


class _StreamsAhead:
    """`stream_tables` of every file, in order, one thread ahead of the caller: the next tables are scanned
    and built while the caller stages (compresses, writes, fsyncs) the ones before. Both sides spend most of
    their time outside the GIL (the native scanner, numpy; Arrow's Parquet writer, fsync): 16 files of the
    real sampler's shape, 6 MB each, took 25 ms a file one after the other. At most DEPTH tables wait."""

    DEPTH = 4

    def __init__(self, files: list[tuple[Path, str]], source: str) -> None:
        self._queue: queue.Queue[tuple[int, pa.Table | None, StreamSummary | BaseException | None]] = (
            queue.Queue(maxsize=self.DEPTH)
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(files, source), name="tailscope-scan", daemon=True
        )
        self._thread.start()

    def _put(self, item: tuple[int, pa.Table | None, StreamSummary | BaseException | None]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, files: list[tuple[Path, str]], source: str) -> None:
        for index, (path, node) in enumerate(files):
            summary = StreamSummary()
            end: StreamSummary | BaseException = summary
            try:
                for table in stream_tables(path, node, source, summary):
                    if not self._put((index, table, None)):
                        return
            except BaseException as exc:  # FastReaderFallback, a file that cannot be opened: the caller's
                end = exc
            if not self._put((index, None, end)):
                return

    def tables(self, index: int, summary: StreamSummary) -> Iterator[pa.Table]:
        """File `index`'s tables as `stream_tables` yields them, then its summary copied into `summary`, or
        what the stream raised (FastReaderFallback: read it whole)."""
        while True:
            got, table, end = self._queue.get()
            if got != index:
                raise RuntimeError(f"stream of file {got} where file {index} was expected")
            if table is not None:
                yield table
                continue
            if isinstance(end, BaseException):
                raise end
            assert end is not None
            summary.header, summary.keys, summary.samples, summary.rows = (
                end.header, end.keys, end.samples, end.rows
            )  # fmt: skip
            return

    def close(self) -> None:
        self._stop.set()


def _import_one(
    load: Transaction, ahead: _StreamsAhead, index: int, path: Path, node: str, source: str
) -> dict[str, Any]:
    """Stage one file's samples in `load`: streamed, or read whole when streaming does not apply (what the
    stream staged is rolled back first)."""
    digest = digest_in_background(path)  # for record_source, while the file is scanned
    point = load.savepoint()
    try:
        summary = StreamSummary()
        for table in ahead.tables(index, summary):
            _stage(load, table, node)
    except FastReaderFallback:
        load.rollback_to(point)
        parsed = parse(path)
        table = samples_table(parsed, node, source)
        summary = StreamSummary(dict(parsed.header), parsed.keys, parsed.n_samples, table.num_rows)
        _stage(load, table, node)
        streamed = False
    else:
        streamed = True
    header = dict(summary.header)

    def remember(manifest: Manifest) -> None:
        manifest.sample_headers.setdefault(node, {})[source] = header

    load.record_source(digest(), str(path))
    load.change_manifest(remember)
    unknown = sorted({k.array for k in summary.keys if k.pmu == UNKNOWN_PMU})
    notes = (
        [f"arrays this importer does not know were stored as they are under pmu {UNKNOWN_PMU} (event = the "
         f"array name, unit = its last index), not interpreted by metrics: {', '.join(unknown)}"]
        if unknown else []
    )  # fmt: skip
    return {"samples": summary.samples, "rows": summary.rows, "series": len(summary.keys), "node": node,
            "notes": notes, "unknown_arrays": unknown, "streamed": streamed, "file": str(path)}  # fmt: skip


def _stage(load: Transaction, table: pa.Table, node: str) -> None:
    for offset in range(0, table.num_rows, CHUNK_ROWS):
        load.write("samples", table.slice(offset, CHUNK_ROWS), node=node)
