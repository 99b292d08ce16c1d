"""Headless Chromium for the web page's tests: Debian's system browser driven by Playwright.

Why the system Chromium: Playwright's own browser download cannot run on the
project's machines (no network but the package registries), so the tests launch
``/usr/bin/chromium`` (Debian's ``chromium``, installed by scripts/setup.sh) with
the flags a closed network needs. Where it or Playwright is missing, the tests
skip and say which.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
#: Without the background-networking flags Chromium keeps trying hosts this network refuses.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1360, "height": 860}
#: Screenshots of every step (git-ignored); UNIRAG_WEB_SHOTS moves them.
SHOTS = Path(os.environ.get("UNIRAG_WEB_SHOTS", Path(__file__).resolve().parent / "artifacts" / "web"))


def chromium_path() -> str:
    """The system Chromium, or a skip naming how to install it."""
    found = next((path for path in CHROMIUM_CANDIDATES if os.access(path, os.X_OK)), None)
    if found is None:
        pytest.skip("Chromium is not installed (apt-get install chromium; scripts/setup.sh does it as root)")
    return found


@contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright browser on the system Chromium; closed afterwards. Playwright starts it
    with a new empty profile (its own temporary ``--user-data-dir``) every time."""
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[dev]')")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def shot(page: Any, name: str) -> Path:
    """Save a screenshot of ``page`` as ``SHOTS/name.png``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
