"""Parameter names as stored, and their names now: one place for both, so every reader of stored params
(plans in campaign.json, runs.params) sees today's names and every variant id keeps its old spelling.

The page policy is `page_policy` from the command line (`--page`, the user's word) to the report. Campaigns
stored before the rename have {"page": ...} in their plans and runs.params, and their variant ids hash that
spelling: `HASH_SPELLING` maps today's names back for the hash (probes/catalogue.py, ProbeVariant.variant_id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PARAM_RENAMES = {"page": "page_policy"}  # stored name -> today's name
HASH_SPELLING = {new: old for old, new in PARAM_RENAMES.items()}  # today's name -> the name ids hash


def current_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Stored parameters under today's names ({"page": "2m"} -> {"page_policy": "2m"})."""
    return {PARAM_RENAMES.get(k, k): v for k, v in params.items()}
