"""Kept for imports written before the read path moved: the views are defined in `store/read.py`."""

from tailscope.store.read import CampaignConnection, connect

__all__ = ["CampaignConnection", "connect"]
