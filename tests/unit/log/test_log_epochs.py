"""Where a leader epoch ended, as Kafka's leader-epoch cache answers OffsetForLeaderEpoch (the cases of
apache/kafka storage/src/test/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCacheTest.java)."""

from __future__ import annotations

from herd.log.api import SINGLE_NODE_EPOCHS, end_offset_for_epoch

HISTORY = ((2, 6), (4, 8), (7, 20))  # epochs 2, 4 and 7 began at offsets 6, 8 and 20; the log ends at 30


def test_the_current_epoch_ends_at_the_log_end():
    assert end_offset_for_epoch(HISTORY, 7, 30) == (7, 30)


def test_an_earlier_epoch_ends_where_the_next_one_began():
    assert end_offset_for_epoch(HISTORY, 2, 30) == (2, 8)
    assert end_offset_for_epoch(HISTORY, 4, 30) == (4, 20)


def test_an_epoch_that_never_led_is_answered_with_the_one_before_it():
    assert end_offset_for_epoch(HISTORY, 3, 30) == (2, 8)
    assert end_offset_for_epoch(HISTORY, 6, 30) == (4, 20)


def test_an_epoch_older_than_any_known_ends_where_the_first_known_began():
    assert end_offset_for_epoch(HISTORY, 1, 30) == (1, 6)


def test_undefined_and_newer_epochs_cannot_be_placed():
    assert end_offset_for_epoch(HISTORY, -1, 30) == (-1, -1)
    assert end_offset_for_epoch(HISTORY, 8, 30) == (-1, -1)
    assert end_offset_for_epoch((), 0, 30) == (-1, -1)


def test_a_single_node_leads_at_epoch_zero_from_the_start():
    assert end_offset_for_epoch(SINGLE_NODE_EPOCHS, 0, 12) == (0, 12)
    assert end_offset_for_epoch(SINGLE_NODE_EPOCHS, 1, 12) == (-1, -1)
