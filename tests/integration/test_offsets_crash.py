"""kill -9 at random moments while a client commits continuously: after every restart each acknowledged
commit is there, and no offset that was never sent appears.

One broker process on a small `__consumer_offsets` (one partition, 16 KiB segments, so compaction runs
between the kills). A committer thread pipelines OffsetCommit v9 requests over a raw socket (up to eight in
flight, so some are always unanswered when the broker dies) with strictly increasing offsets per partition,
and remembers the last one acknowledged for each partition. The test kills the broker after a random
0.05-0.5 s, restarts it on the same data directory, checks every partition's committed offset, and goes on.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from typing import Any

import pytest
from brokers import BrokerProcess
from kio.schema.errors import ErrorCode
from ports import refused_port
from rawkafka import RawClient
from test_groups_api import part, req

from herd.testing.wait import wait_until

COMMIT, FETCH, CREATE_TOPICS = 8, 9, 19
PARTITIONS = 6
KILLS = 22
WINDOW = 8


class Committer(threading.Thread):
    """Commits offset n+1 after n to each partition in turn until the connection dies."""

    def __init__(self, port: int, group: str, sent: dict[int, list[int]], acked: dict[int, int]) -> None:
        super().__init__(daemon=True)
        self.port, self.group, self.sent, self.acked = port, group, sent, acked
        self.answered = 0

    def run(self) -> None:
        try:
            client = RawClient(self.port, timeout=5)
        except OSError:
            return
        in_flight: deque[tuple[int, int]] = deque()
        p = 0
        try:
            while True:
                while len(in_flight) < WINDOW:
                    value = self.sent[p][-1] + 1 if self.sent[p] else 0
                    self.sent[p].append(value)
                    client.send_raw(client.encode(COMMIT, 9, commit_request(self.group, p, value)))
                    in_flight.append((p, value))
                    p = (p + 1) % PARTITIONS
                response = client.read_response(COMMIT, 9)
                q, value = in_flight.popleft()
                if response.topics[0].partitions[0].error_code == ErrorCode.none:
                    self.acked[q] = value
                    self.answered += 1
        except (OSError, ConnectionError, ValueError):
            pass  # the broker died under us
        finally:
            client.close()


def commit_request(group: str, partition: int, value: int) -> Any:
    topic = part(
        COMMIT,
        9,
        "OffsetCommitRequestTopic",
        name="data",
        partitions=(
            part(
                COMMIT,
                9,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=value,
                committed_leader_epoch=-1,
                committed_metadata="",
            ),
        ),
    )
    return req(COMMIT, 9, group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=(topic,))


def committed(port: int, group: str, timeout: float = 20.0) -> dict[int, int]:
    """The group's offsets once the coordinator has loaded (COORDINATOR_LOAD_IN_PROGRESS is retried)."""
    topic = part(FETCH, 7, "OffsetFetchRequestTopic", name="data", partition_indexes=tuple(range(PARTITIONS)))

    def fetched() -> list[dict[int, int]] | None:
        with RawClient(port) as c:
            r = c.request(FETCH, 7, req(FETCH, 7, group_id=group, topics=(topic,), require_stable=True))
        if r.error_code == ErrorCode.none:
            return [{p.partition_index: p.committed_offset for p in r.topics[0].partitions}]
        assert r.error_code == ErrorCode.coordinator_load_in_progress, r
        return None

    return wait_until(fetched, timeout, f"the coordinator of {group} to finish loading", interval=0.02)[0]


@pytest.mark.slow
def test_acknowledged_commits_survive_kill_9_at_random_moments(tmp_path):
    rng = random.Random(20261121)
    broker = BrokerProcess(
        tmp_path / "data", {"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "16384"}
    ).start()
    with RawClient(broker.port) as c:
        c.request(
            CREATE_TOPICS,
            7,
            req(
                CREATE_TOPICS,
                7,
                timeout=10_000,
                validate_only=False,
                topics=(
                    part(
                        CREATE_TOPICS,
                        7,
                        "CreatableTopic",
                        name="data",
                        num_partitions=PARTITIONS,
                        replication_factor=1,
                        assignments=(),
                        configs=(),
                    ),
                ),
            ),
        )
    sent: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    acked: dict[int, int] = {}
    answered = 0
    try:
        for _ in range(KILLS):
            committer = Committer(broker.port, "crash-group", sent, acked)
            committer.start()
            time.sleep(rng.uniform(0.05, 0.5))
            broker.kill()
            committer.join(10)
            assert not committer.is_alive()
            answered += committer.answered
            broker.restart()
            found = committed(broker.port, "crash-group")
            for p, offset in found.items():
                assert offset >= acked.get(p, -1), f"partition {p}: acknowledged {acked.get(p)}, found {offset}"
                assert offset == -1 or offset in sent[p], f"partition {p}: {offset} was never sent"
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.stop()
    assert answered > KILLS * 5, f"only {answered} commits were acknowledged over {KILLS} runs"


def test_the_committer_sees_a_refused_connection_as_the_end(tmp_path):
    """The harness itself: a committer against a port nobody listens on stops at once."""
    with refused_port() as port:
        committer = Committer(port, "g", {p: [] for p in range(PARTITIONS)}, {})
        committer.start()
        committer.join(5)
    assert not committer.is_alive() and committer.answered == 0
