"""The epilog record: what `tailscope jobs epilog` writes for one job on one node (the interface between the
epilog and the analysis; fields may be added, never removed).

    {"version": 1, "cluster": str|None, "job_id": str, "node": str,
     "at": ISO-8601 UTC str (epilog time), "job_start": ISO str|None, "span_s": float|None,
     "evidence": {name: number|str},   flat names ("thermal.package_throttle_count", "cpufreq.min_khz",
                                       "vmstat.compact_stall", "edac.ce_count", "mce.count", "load.avg1",
                                       "corunners.cpu_s"); a counter is a delta over the job's span where a
                                       start snapshot exists, else its absolute value named "<name>.total"
     "facts_digest": str, "epilog_cpu_s": float, "epilog_wall_s": float, "errors": [str],
     "figures": {name: {"value": float, "higher_is_better": bool}}   optional: the job's figures of merit
                                       where an application definition named them and the job's output
                                       held them (then a class's slowdown is read from the figure)}

`checked` refuses a record that is not this shape (one line naming the field); it imports nothing heavy.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable
from typing import Any

from tailscope.errors import InputError

VERSION = 1
MAX_RECORD_BYTES = 64 * 1024  # one job on one node: a few hundred bytes in practice
MAX_NAME = 255  # a node, job id or cluster name
MAX_EVIDENCE = 256  # evidence names in one record
MAX_TEXT = 512  # an evidence string value, an error line


class EpilogRecordError(InputError):
    """An epilog record that is not the documented shape."""


def _fail(field: str, expected: str, value: Any) -> EpilogRecordError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return EpilogRecordError(f"epilog record: {field}: expected {expected}, got {shown}")


def _name(record: dict[str, Any], field: str, *, optional: bool = False) -> str | None:
    value = record.get(field)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or not value.isprintable():
        raise _fail(field, f"a printable string of 1-{MAX_NAME} characters", value)
    return value


def _time(record: dict[str, Any], field: str, *, optional: bool = False) -> str | None:
    value = record.get(field)
    if value is None and optional:
        return None
    if isinstance(value, str) and len(value) <= 40:
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                raise _fail(field, "an ISO-8601 time with its zone (UTC: ...Z or +00:00)", value)
            return parsed.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    raise _fail(field, "an ISO-8601 time like 2026-11-02T14:00:00Z", value)


def _number(record: dict[str, Any], field: str, *, optional: bool = False) -> float | None:
    value = record.get(field)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(field, "a finite number", value)
    return float(value)


def checked(record: Any) -> dict[str, Any]:
    """The record with its times normalised to UTC ('...Z'); EpilogRecordError names the first bad field."""
    if not isinstance(record, dict):
        raise _fail("record", "an object", record)
    if record.get("version") != VERSION:
        raise _fail("version", f"{VERSION}", record.get("version"))
    out = dict(record)
    out["cluster"] = _name(record, "cluster", optional=True)
    out["job_id"] = _name(record, "job_id")
    out["node"] = _name(record, "node")
    out["at"] = _time(record, "at")
    out["job_start"] = _time(record, "job_start", optional=True)
    out["span_s"] = _number(record, "span_s", optional=True)
    for field in ("epilog_cpu_s", "epilog_wall_s"):
        out[field] = _number(record, field)
    digest = record.get("facts_digest")
    if not isinstance(digest, str) or len(digest) > MAX_NAME:
        raise _fail("facts_digest", "a string (the node facts' digest; empty when unknown)", digest)
    evidence = record.get("evidence")
    if not isinstance(evidence, dict) or len(evidence) > MAX_EVIDENCE:
        raise _fail("evidence", f"an object of at most {MAX_EVIDENCE} names", evidence)
    for name, value in evidence.items():
        if not isinstance(name, str) or not name or len(name) > MAX_NAME or not name.isprintable():
            raise _fail("evidence", "printable names", name)
        numeric = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not (numeric or (isinstance(value, str) and len(value) <= MAX_TEXT)):
            raise _fail(
                f"evidence.{name}", f"a finite number or a string of at most {MAX_TEXT} characters", value
            )
    errors = record.get("errors")
    if not isinstance(errors, list) or not all(isinstance(e, str) and len(e) <= MAX_TEXT for e in errors):
        raise _fail("errors", f"a list of strings of at most {MAX_TEXT} characters", errors)
    figures = record.get("figures")
    if figures is not None:
        if not isinstance(figures, dict) or len(figures) > MAX_EVIDENCE:
            raise _fail("figures", "an object {name: {value, higher_is_better}}", figures)
        for name, figure in figures.items():
            if (
                not isinstance(name, str)
                or not name
                or len(name) > MAX_NAME
                or not isinstance(figure, dict)
                or not isinstance(figure.get("higher_is_better"), bool)
            ):
                raise _fail(
                    f"figures.{name}", "{value: a positive number, higher_is_better: true|false}", figure
                )
            value = figure.get("value")
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value > 0)
            ):
                raise _fail(f"figures.{name}.value", "a positive finite number", value)
    if len(encode(out)) > MAX_RECORD_BYTES:
        raise _fail("record", f"at most {MAX_RECORD_BYTES} bytes as JSON", f"{len(encode(out))} bytes")
    return out


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def key(record: dict[str, Any]) -> tuple[str, str, str]:
    """(cluster, job_id, node): one record per job and node (a later one replaces it). No cluster: ''."""
    return (record.get("cluster") or "", str(record["job_id"]), str(record["node"]))


def latest_records(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (cluster, job, node): the one written by the latest epilog (`at`)."""
    best: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in records:
        k = key(r)
        if k not in best or str(r["at"]) >= str(best[k]["at"]):
            best[k] = r
    return list(best.values())
