"""Statistics of a campaign: `analyze(runs, iterations, settings, campaign) -> CampaignAnalysis`.

One statistic per module: quantiles (order-statistic intervals), binomial (slow-run counts), robust
(MAD scores), scaling (node-median scaling), classify (systematic vs transient), fwq_noise, power;
summary wires them, verdict and notes word the outcome. See docs in each module for sources.

`analyze` is imported on first use (PEP 562), so that `tailscope --help` and the result model do not load
scipy and pandas.
"""

from __future__ import annotations

from typing import Any

from tailscope.analysis.settings import settings_from_dict, validate_settings

__all__ = ["analyze", "settings_from_dict", "validate_settings"]


def __getattr__(name: str) -> Any:
    if name == "analyze":
        from tailscope.analysis.summary import analyze

        return analyze
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
