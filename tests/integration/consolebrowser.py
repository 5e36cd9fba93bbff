"""Headless Chromium for the console's tests: Debian's /usr/bin/chromium (which `./dev test` installs) driven by
Playwright. `browser()` is a context manager giving a launched browser; a missing binary fails the test
with what to do (a skip would hide that the console went untested)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Debian's chromium is not at {CHROMIUM}: run ./dev test (it installs it) or apt-get install chromium",
            pytrace=False,
        )

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
