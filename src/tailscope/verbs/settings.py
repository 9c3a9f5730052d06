"""The one place a campaign's judging settings are resolved, for analyze, report, compare, verdict and check.

A campaign submitted from a Slurm spec carries its `[thresholds]` (DIR/slurm/spec.toml, campaign/spec.py);
options given on the command line override them one by one; what neither names keeps the analysis' default
(analysis.model.Settings). So every verb judges one campaign with the same limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tailscope.analysis.model import Settings
from tailscope.analysis.settings import settings_from_dict
from tailscope.errors import InputError, UsageError

SPEC = Path("slurm") / "spec.toml"  # where `campaign submit` keeps the spec inside the campaign


def checked_overrides(overrides: Mapping[str, Any]) -> Settings:
    """The command line's settings over the defaults, or UsageError naming the option that is out of range."""
    for d in overrides.get("thresholds") or ():
        if not 0 < d < 1:
            raise UsageError(f"--threshold {d}: expected a fraction between 0 and 1 (0.05 = 5%)")
    try:
        return settings_from_dict(overrides)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def spec_settings(campaign_dir: Path | None) -> Settings:
    """The campaign spec's [thresholds] (a Slurm campaign), else the defaults."""
    if campaign_dir is None:
        return Settings()
    spec_path = Path(campaign_dir) / SPEC
    if not spec_path.is_file():
        return Settings()
    from tailscope.campaign.spec import SpecError, load_spec

    try:
        return load_spec(spec_path).settings
    except SpecError as exc:
        raise InputError(str(exc)) from exc


def judging_settings(campaign_dir: Path | None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings a campaign is judged with: its spec's [thresholds], then `overrides` (Settings field
    names, as the command line gives them; None turns a limit off). The overrides are checked first, so a
    bad option is refused before the campaign is read."""
    overrides = dict(overrides or {})
    checked_overrides(overrides)
    base = spec_settings(campaign_dir)
    if not overrides:
        return base
    try:
        return settings_from_dict(overrides, base=base)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# The judging options of analyze, report, compare, check and verdict (cli.py declares them once) -> the
# Settings fields they set.
OPTIONS = {
    "threshold": "thresholds", "allowed_slow_rate": "allowed_slow_rate", "confidence": "confidence",
    "max_slow_rate": "max_slow_rate", "max_q01_drop": "max_q01_drop", "max_cv": "max_cv",
    "max_cv_ratio": "max_cv_ratio", "max_busy_share": "max_busy_share", "max_level_drop": "max_level_drop",
}  # fmt: skip


def given_options(args: object) -> dict[str, Any]:
    """The judging options given on a parsed command line, as Settings fields ('off' turns a limit off)."""
    values: dict[str, Any] = {}
    for option, name in OPTIONS.items():
        value = getattr(args, option, None)
        if value is not None:
            values[name] = tuple(value) if option == "threshold" else value
    return values


def settings_of(args: Any) -> Settings:
    """The judging settings of a verb's command line: its campaign's (`args.campaign`, where it names an
    existing one), then the options given."""
    return judging_settings(getattr(args, "campaign", None), given_options(args))
