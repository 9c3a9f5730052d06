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

