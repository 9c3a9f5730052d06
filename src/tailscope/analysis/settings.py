"""Build and check analysis Settings from plain values (CLI options, a JSON/TOML table).

Errors are one line naming the setting, the value and what was expected, so the CLI can print them and
exit 2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tailscope.analysis.model import Settings

_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
_OPTIONAL = ("max_slow_rate", "max_q01_drop", "max_cv", "max_cv_ratio", "max_level_drop")
_OPEN_UNIT = ("alpha", "confidence", "quantile_rule_q")  # strictly between 0 and 1
# May also be 0: a rate of 0 allows no slow run at all (any slow run fails the test), a drop limit of 0
# allows no drop; a given rate of 0 has no "trials needed".
_HALF_OPEN_UNIT = ("allowed_slow_rate", "given_rate", "max_slow_rate", "max_q01_drop", "max_level_drop")


def settings_from_dict(values: Mapping[str, Any], base: Settings | None = None) -> Settings:
    """Settings from `values` (keys are Settings field names; None or "off" turns a limit off, as TOML
    has no null).

    Keys not given keep the value of `base` (default: `Settings()`). `thresholds` accepts any sequence of
    numbers; the first is the primary one.
    """
    unknown = sorted(set(values) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown analysis setting {unknown[0]!r}; known settings: {', '.join(_FIELDS)}")
    changes: dict[str, Any] = {}
    for name, value in values.items():
        if name == "thresholds":
            if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
                raise ValueError(f"setting thresholds: expected a list of numbers, got {value!r}")
            changes[name] = tuple(_number(name, v) for v in value)
        elif name in _OPTIONAL and (value is None or (isinstance(value, str) and value.lower() == "off")):
            changes[name] = None
        else:
            changes[name] = _number(name, value)
    settings = dataclasses.replace(base or Settings(), **changes)
    validate_settings(settings)
    return settings


def validate_settings(settings: Settings) -> None:
    """Raise ValueError (one line) for the first setting that is out of range."""
    if not settings.thresholds:
        raise ValueError("setting thresholds: expected at least one slow threshold, got none")
    for d in settings.thresholds:
        if not 0.0 < d < 1.0:
            raise ValueError(f"setting thresholds: each must be in (0, 1) (0.05 = 5% slower), got {d}")
    for name in _OPEN_UNIT:
        value = getattr(settings, name)
        if not 0.0 < value < 1.0:
            raise ValueError(f"setting {name}: expected a number in (0, 1), got {value}")
    for name in _HALF_OPEN_UNIT:
        value = getattr(settings, name)
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"setting {name}: expected a number in [0, 1), got {value}")
    if settings.max_cv is not None and not settings.max_cv >= 0.0:
        raise ValueError(f"setting max_cv: expected a number >= 0 (0.01 = 1%), got {settings.max_cv}")
    if settings.max_cv_ratio is not None and not settings.max_cv_ratio >= 1.0:
        raise ValueError(
            f"setting max_cv_ratio: expected a number >= 1 (3 = three times), got {settings.max_cv_ratio}"
        )
    if not 0.0 <= settings.max_busy_share <= 1.0:
        raise ValueError(
            f"setting max_busy_share: expected a number in [0, 1], got {settings.max_busy_share}"
        )
    if not settings.floor_sds > 0.0:
        raise ValueError(f"setting floor_sds: expected a number > 0, got {settings.floor_sds}")
    if not settings.robust_cut > 0.0:
        raise ValueError(f"setting robust_cut: expected a number > 0, got {settings.robust_cut}")
    if not -1.0 < settings.quantile_rule_limit < 1.0:
        raise ValueError(
            "setting quantile_rule_limit: expected a fraction like -0.005, "
            f"got {settings.quantile_rule_limit}"
        )


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"setting {name}: expected a number, got {value!r}")
    return float(value)
