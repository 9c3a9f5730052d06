"""Statistics of a campaign: `analyze(runs, iterations, settings, campaign) -> CampaignAnalysis`.

One statistic per module: quantiles (order-statistic intervals), binomial (slow-run counts), robust
(MAD scores), scaling (node-median scaling), classify (systematic vs transient), fwq_noise, power;
summary wires them, verdict and notes word the outcome. See docs in each module for sources.
"""

from tailscope.analysis.settings import settings_from_dict, validate_settings
from tailscope.analysis.summary import analyze

__all__ = ["analyze", "settings_from_dict", "validate_settings"]
