"""placement.elect: ElectLeaders' rules (a preferred leader is where a balancing step puts the partition)."""

from __future__ import annotations

from herd.cluster.placement import Election, Slot, elect


def _slots(leaders: list[int | None], topic: str = "t") -> list[Slot]:
    return [Slot(key, topic, leader) for key, leader in enumerate(leaders)]


def test_a_balanced_cluster_needs_no_election():
    slots = _slots([0, 1, 2, 0, 1, 2])
    outcomes = elect(slots, [0, 1, 2], range(6), preferred=True)
    assert outcomes == {k: (Election.NOT_NEEDED, s.leader) for k, s in enumerate(slots)}


def test_preferred_puts_back_a_partition_moved_onto_a_loaded_node():
    # partition 2 was moved from node 2 to node 0 (a move on demand): node 0 leads 2, node 2 none
    outcomes = elect(_slots([0, 1, 0]), [0, 1, 2], range(3), preferred=True)
    assert outcomes == {0: (Election.ELECTED, 2), 1: (Election.NOT_NEEDED, 1), 2: (Election.NOT_NEEDED, 0)}


def test_preferred_of_a_partition_balance_does_not_move_is_not_needed():
    assert elect(_slots([0, 1, 0]), [0, 1, 2], [2], preferred=True) == {2: (Election.NOT_NEEDED, 0)}


def test_unclean_leaves_live_leaders_where_they_are_and_gives_orphans_one():
    outcomes = elect(_slots([0, 0, 0, 5]), [0, 1], range(4), preferred=False)
    assert outcomes == {
        0: (Election.NOT_NEEDED, 0),
        1: (Election.NOT_NEEDED, 0),
        2: (Election.NOT_NEEDED, 0),
        3: (Election.ELECTED, 1),
    }


def test_without_an_eligible_node_an_orphan_gets_no_leader():
    for preferred in (True, False):
        assert elect(_slots([3, None]), [], range(2), preferred=preferred) == {
            0: (Election.NO_LEADER, None),
            1: (Election.NO_LEADER, None),
        }


def test_a_node_shutting_down_keeps_its_partitions_without_counting():
    outcomes = elect(_slots([0, 0, 9]), [1], range(3), keep=[0], preferred=True)
    assert outcomes == {0: (Election.NOT_NEEDED, 0), 1: (Election.NOT_NEEDED, 0), 2: (Election.ELECTED, 1)}
