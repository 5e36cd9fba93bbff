"""herd.cli.localpg.free_port: ports for servers that cannot listen on port 0 (PostgreSQL, `herd cluster up
--base-port`), picked where the kernel never hands a port out to a port-0 bind of another process."""

from __future__ import annotations

import socket

import pytest

from herd.cli import localpg
from herd.cli.localpg import free_port, port_is_free


def test_the_ports_are_free_consecutive_and_outside_the_ephemeral_range() -> None:
    low, high = localpg._ephemeral_range()
    for count in (1, 3):
        for _ in range(20):
            base = free_port(count)
            assert all(port_is_free(base + i) for i in range(count))
            assert all(not low <= base + i <= high for i in range(count)), (base, low, high)
            assert base >= localpg._PICK_FLOOR and base + count - 1 <= 65535


def test_a_port_bound_to_zero_never_lands_where_free_port_picks() -> None:
    low, high = localpg._ephemeral_range()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert low <= s.getsockname()[1] <= high  # the premise: the kernel picks inside its range


def test_without_room_outside_the_ephemeral_range_one_port_is_any_free_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localpg, "_ephemeral_range", lambda: (1024, 65535))
    assert port_is_free(free_port())
    with pytest.raises(OSError, match="no 3 consecutive free ports"):
        free_port(3)


def test_an_unreadable_range_file_means_linux_s_default(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(localpg, "_PORT_RANGE_FILE", tmp_path / "missing")
    assert localpg._ephemeral_range() == (32768, 60999)
    (tmp_path / "garbled").write_text("32768\n")
    monkeypatch.setattr(localpg, "_PORT_RANGE_FILE", tmp_path / "garbled")
    assert localpg._ephemeral_range() == (32768, 60999)
