"""Suite-wide fixtures and markers (slow, root, browser: see pyproject.toml)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (pagemap frame numbers, hugetlb reservation, Slurm daemons)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)



# Property tests run the same examples every time (CI and a developer see the same inputs; a failure found
# once is found again): hypothesis' derandomized profile.
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("tailscope", derandomize=True, print_blob=True)
    _hypothesis_settings.load_profile("tailscope")
except ImportError:  # pragma: no cover - hypothesis is in the test extras
    pass
