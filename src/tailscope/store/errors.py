"""Errors of the campaign store."""

from __future__ import annotations

from tailscope.errors import InputError


class StoreError(InputError):
    """Bad, damaged or unreadable store content, or a campaign that cannot be used as asked; the message names
    the file and what was expected (or what to do)."""


class CampaignBusyError(StoreError):
    """Every trial this command would run is held by another live writer; the message names it."""
