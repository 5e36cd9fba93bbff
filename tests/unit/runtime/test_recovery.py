"""Backoff: retries of a failed partition double from initial_ms up to max_ms, and only the start and the end of
a streak of failures are reported (one log line each)."""

from __future__ import annotations

from herd.runtime.recovery import Backoff


def test_retries_double_up_to_the_cap_and_a_streak_is_reported_once() -> None:
    backoff = Backoff(100, 400)
    assert backoff.due("p", 0) and backoff.delay_ms("p", 0) == 0  # never failed: try at once
    assert backoff.failed("p", 0) is True  # starts a streak: log it
    delays = [backoff.delay_ms("p", 0)]
    for now in (100, 300, 700, 1100):
        assert backoff.due("p", now) and not backoff.due("p", now - 1)
        assert backoff.failed("p", now) is False  # the same streak: not logged again
        delays.append(backoff.delay_ms("p", now))
    assert delays == [100, 200, 400, 400, 400]
    assert backoff.succeeded("p") is True  # ends the streak: log it
    assert backoff.succeeded("p") is False and backoff.delay_ms("p", 1100) == 0
    assert backoff.failed("p", 2000) is True and backoff.delay_ms("p", 2000) == 100  # a new streak starts over


def test_keys_are_paced_on_their_own() -> None:
    backoff = Backoff(100, 1000)
    backoff.failed("a", 0)
    backoff.failed("a", 100)
    backoff.failed("b", 100)
    assert backoff.delay_ms("a", 100) == 200 and backoff.delay_ms("b", 100) == 100
