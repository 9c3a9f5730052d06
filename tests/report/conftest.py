"""The headless Chromium driver for browser tests (`chromium` fixture); builders are in report_builders.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    """A headless Debian Chromium under selenium, offline flags, fresh profile; console log enabled.

    Skips (with the reason) when chromium, chromedriver or selenium is missing.
    """
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not (p.exists() and os.access(p, os.X_OK))]
    if missing:
        pytest.skip(
            f"headless browser test needs {' and '.join(missing)} "
            "(Debian packages chromium and chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="tailscope-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="session")
def check_run(tmp_path_factory):
    """`tailscope check --trials 6` on this node: its terminal output (100 columns) and its report."""
    root = tmp_path_factory.mktemp("check")
    env = {**os.environ, "COLUMNS": "100"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tailscope",
            "check",
            "--trials",
            "6",
            "--no-progress",
            "--campaign",
            str(root / "c"),
            "-o",
            str(root / "report.html"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode in (0, 1, 3), proc.stderr  # healthy, degraded, inconclusive (a busy VM)
    return proc.stdout, root / "report.html"
