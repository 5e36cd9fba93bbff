#!/usr/bin/env python
"""Leader election among Python processes with herd's group-membership client.

    python examples/leader_election.py [--bootstrap-server 127.0.0.1:9092] [--workers 3]

starts N worker processes in one group of protocol type "election" (not "consumer": the group carries
no partitions, only the protocol defined here). Each worker joins with its name, its start time and
whether it leads now; the member the coordinator picks to assign keeps the current leader if it is still
there (leadership is sticky: a newcomer does not take over), otherwise it elects the longest-running
worker, and tells everyone who leads. The launcher waits until one leader is known to all, kills it with
SIGKILL, and shows another worker taking over once the coordinator has noticed (the session timeout),
then stops the rest cleanly. Worker output:

    worker-2: LEADER generation=2 members=worker-1,worker-2,worker-3
    worker-1: FOLLOWER leader=worker-2 generation=2
    worker-1: revoked generation=2        (a rebalance began: followers and leader stop acting)

One worker on its own: `python examples/leader_election.py --worker NAME [--group G]`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from herd_workers import Workers, common_arguments, run_worker, say  # noqa: E402

from herd.client.group import GroupMember  # noqa: E402
from herd.client.group_protocol import GroupAssignment, GroupProtocol, JoinedMember  # noqa: E402


class Election(GroupProtocol):
    """Protocol type "election": metadata {name, started, leading}; assignment {leader, members, you_lead}."""

    protocol_type = "election"

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = time.time()
        self.leading = False

    def metadata(self, held: GroupAssignment | None) -> Sequence[tuple[str, bytes]]:
        me = {"name": self.name, "started": self.started, "leading": self.leading}
        return [("sticky-v1", json.dumps(me).encode())]

    def assign(self, protocol_name: str, members: Sequence[JoinedMember]) -> dict[str, bytes]:
        info = {m.member_id: json.loads(m.metadata) for m in members}
        current = sorted(mid for mid, i in info.items() if i["leading"])
        leader = current[0] if current else min(info, key=lambda mid: (info[mid]["started"], info[mid]["name"]))
        names = sorted(i["name"] for i in info.values())
        return {
            mid: json.dumps({"leader": info[leader]["name"], "members": names, "you_lead": mid == leader}).encode()
            for mid in info
        }

    def on_assignment(self, assignment: GroupAssignment) -> None:
        self.leading = json.loads(assignment.data)["you_lead"]

    def on_reset(self) -> None:
        self.leading = False  # the generation is gone: whoever leads next is decided afresh


def worker(name: str, bootstrap: str, group: str, session_timeout_ms: int) -> None:
    def assigned(a: GroupAssignment) -> None:
        d = json.loads(a.data)
        if d["you_lead"]:
            say(f"{name}: LEADER generation={a.generation_id} members={','.join(d['members'])}")
        else:
            say(f"{name}: FOLLOWER leader={d['leader']} generation={a.generation_id}")

    def member() -> GroupMember:
        return GroupMember(
            bootstrap,
            group,
            Election(name),
            client_id=name,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, session_timeout_ms // 10),
            rebalance_timeout_ms=10_000,
            on_assigned=assigned,
            on_revoked=lambda a: say(f"{name}: revoked generation={a.generation_id}"),
            on_lost=lambda a: say(f"{name}: lost generation={a.generation_id}"),
        )

    run_worker(member)


def leader_known_to_all(n: int):
    def check(name: str, line: str) -> str | None:
        if ": LEADER " in line and line.count(",") == n - 1:
            return name
        return None

    return check


def main() -> None:
    args = common_arguments(__doc__.splitlines()[1]).parse_args()
    group = args.group or "herd-election-demo"
    if args.worker:
        worker(args.worker, args.bootstrap_server, group, args.session_timeout_ms)
        return
    say(f"== starting {args.workers} workers in group {group!r} on {args.bootstrap_server} ==")
    workers = Workers(os.path.abspath(__file__), args, group)
    leader = workers.wait_for(leader_known_to_all(args.workers), "a leader known to every worker")
    say(f"== {leader} leads; killing it with SIGKILL ==")
    workers.kill(leader)
    killed_at = time.monotonic()
    successor = workers.wait_for(
        lambda name, line: name if name != leader and ": LEADER " in line else None, "a new leader"
    )
    say(
        f"== {successor} leads now, {time.monotonic() - killed_at:.1f}s after the kill "
        f"(session timeout {args.session_timeout_ms / 1000:g}s) =="
    )
    workers.stop()


if __name__ == "__main__":
    main()
