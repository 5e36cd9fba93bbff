"""Fixtures of the integration tests; the helpers they use are plain modules here (groupmembers, clients)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from groupmembers import Member, stop_all


@pytest.fixture
def members() -> Iterator[list[Member]]:
    """The members a test starts (it appends them); stopped afterwards."""
    started: list[Member] = []
    yield started
    stop_all(started)
