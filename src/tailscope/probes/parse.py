"""Parse a probe's JSON-lines output (docs/probes.md) into one `ProbeOutput`.

This is the only reader of probe output. It is strict about what the analysis needs (a `config` first, a
`result` last on success, numbers where numbers belong) and ignores keys it does not know.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tailscope.errors import InputError


class ProbeOutputError(InputError, ValueError):
    """Probe output that does not follow the contract; the message names the line."""


@dataclass
class ProbeOutput:
    config: dict[str, Any]
    warnings: list[dict[str, Any]] = field(default_factory=list)
    pages: list[dict[str, Any]] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)
    counters: list[dict[str, Any]] = field(default_factory=list)
    validation: dict[str, Any] | None = None
    result: dict[str, Any] | None = None

    @property
    def validated(self) -> bool:
        return bool(self.validation and self.validation.get("passed"))


_ITERATION_REQUIRED = ("iteration", "warmup", "seconds", "value")
_RESULT_REQUIRED = ("metric", "unit", "value", "higher_is_better")
_COUNTERS_REQUIRED = ("source", "pmu", "event", "value")


def _require(record: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    missing = [k for k in keys if k not in record]
    if missing:
        raise ProbeOutputError(f"{where}: {record.get('record')} record lacks {', '.join(missing)}")


def parse_probe_output(text: str, *, name: str = "probe") -> ProbeOutput:
    """Parse the whole stdout of one probe process."""
    out: ProbeOutput | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name} stdout line {lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ProbeOutputError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict) or "record" not in record:
            raise ProbeOutputError(f'{where}: expected an object with a "record" key')
        kind = record["record"]
        if out is None:
            if kind != "config":
                raise ProbeOutputError(f"{where}: the first record must be config, not {kind!r}")
            out = ProbeOutput(config=record)
            continue
        if out.result is not None:
            raise ProbeOutputError(f"{where}: {kind!r} record after the result record")
        if kind == "warning":
            out.warnings.append(record)
        elif kind == "pages":
            out.pages.append(record)
        elif kind == "iteration":
            _require(record, _ITERATION_REQUIRED, where)
            out.iterations.append(record)
        elif kind == "counters":
            _require(record, _COUNTERS_REQUIRED, where)
            if not isinstance(record["value"], int | float) or isinstance(record["value"], bool):
                raise ProbeOutputError(f"{where}: counters value {record['value']!r} is not a number")
            out.counters.append(record)
        elif kind == "validation":
            out.validation = record
        elif kind == "result":
            _require(record, _RESULT_REQUIRED, where)
            if not isinstance(record["value"], int | float):
                raise ProbeOutputError(f"{where}: result value {record['value']!r} is not a number")
            out.result = record
        elif kind == "config":
            raise ProbeOutputError(f"{where}: a second config record")
        # unknown record kinds are ignored (forward compatibility)
    if out is None:
        raise ProbeOutputError(f"{name}: no output (expected a config record first)")
    return out
