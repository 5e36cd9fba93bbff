"""The plugin's own tests: pytest's `pytester` plugin, for the test that runs a user's test file in a pytest
of its own (a conftest below the top one may not name it in `pytest_plugins`, so it is registered here)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin("pytester"):
        config.pluginmanager.import_plugin("pytester")
