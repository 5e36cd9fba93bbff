#!/usr/bin/env python
"""Work distribution among Python processes with herd's group-membership client.

    python examples/work_distribution.py [--bootstrap-server 127.0.0.1:9092] [--workers 3] [--jobs 12]

starts N worker processes sharing a fixed set of jobs (job-00, job-01, ...) through a group of protocol
type "work". Each worker joins with its name and the jobs it owns now. The assigning member balances the
jobs (counts differ by at most one) while leaving every job where it is when it can (sticky), and uses the
cooperative protocol (KIP-429): a job that must move is first taken from its owner only, who releases it
and rejoins; the next generation hands it to its new owner. So no job ever has two owners, and a rebalance
does not stop the jobs that stay put. The launcher waits until every job has one owner, kills one worker
with SIGKILL, and shows the others taking over its jobs once its session has timed out. Worker output:

    worker-1: owns job-00,job-03,job-06,job-09 generation=4
    worker-2: releases job-05 generation=3     (cooperative: only what moves is given up)

One worker on its own: `python examples/work_distribution.py --worker NAME [--group G] [--jobs N]`.
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


def jobs_of(data: bytes) -> list[str]:
    return json.loads(data) if data else []


def balance(jobs: list[str], claims: dict[str, set[str]]) -> dict[str, list[str]]:
    """Sticky balanced assignment: members keep owned jobs up to their quota; the rest go to the least loaded."""
    members = sorted(claims, key=lambda m: (-len(claims[m] & set(jobs)), m))
    base, extra = divmod(len(jobs), len(members))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(members)}
    result: dict[str, list[str]] = {m: [] for m in members}
    taken: set[str] = set()
    for m in members:
        for job in sorted(claims[m] & set(jobs) - taken)[: quota[m]]:
            result[m].append(job)
            taken.add(job)
    for job in (j for j in jobs if j not in taken):
        m = min((m for m in members if len(result[m]) < quota[m]), key=lambda m: (len(result[m]), m))
        result[m].append(job)
    return result


def withhold_moves(result: dict[str, list[str]], claims: dict[str, set[str]]) -> dict[str, list[str]]:
    """Cooperative: a job still claimed by another member is not handed out in this generation."""
    return {m: [j for j in jobs if not any(j in claims[o] for o in claims if o != m)] for m, jobs in result.items()}


class WorkSharing(GroupProtocol):
    """Protocol type "work": metadata {name, owned}; assignment: the sorted list of a member's jobs."""

    protocol_type = "work"

    def __init__(self, name: str, jobs: list[str]) -> None:
        self.name, self.jobs = name, jobs

    def metadata(self, held: GroupAssignment | None) -> Sequence[tuple[str, bytes]]:
        owned = jobs_of(held.data) if held is not None else []
        return [("sticky-cooperative-v1", json.dumps({"name": self.name, "owned": owned}).encode())]

    def assign(self, protocol_name: str, members: Sequence[JoinedMember]) -> dict[str, bytes]:
        claims = {m.member_id: set(json.loads(m.metadata)["owned"]) for m in members}
        result = withhold_moves(balance(self.jobs, claims), claims)
        return {m: json.dumps(sorted(jobs)).encode() for m, jobs in result.items()}

    def is_cooperative(self, protocol_name: str) -> bool:
        return True

    def revoked(self, protocol_name: str, old: bytes, new: bytes) -> bytes | None:
        gone = sorted(set(jobs_of(old)) - set(jobs_of(new)))
        return json.dumps(gone).encode() if gone else None


def worker(name: str, bootstrap: str, group: str, session_timeout_ms: int, jobs: list[str]) -> None:
    def assigned(a: GroupAssignment) -> None:
        say(f"{name}: owns {','.join(jobs_of(a.data)) or '-'} generation={a.generation_id}")

    def member() -> GroupMember:
        return GroupMember(
            bootstrap,
            group,
            WorkSharing(name, jobs),
            client_id=name,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=max(100, session_timeout_ms // 10),
            rebalance_timeout_ms=10_000,
            on_assigned=assigned,
            on_revoked=lambda a: say(f"{name}: releases {','.join(jobs_of(a.data))} generation={a.generation_id}"),
            on_lost=lambda a: say(f"{name}: lost {','.join(jobs_of(a.data))}"),
        )

    run_worker(member)


class Ownership:
    """The launcher's view: the jobs each worker last said it owns."""

    def __init__(self, jobs: list[str]) -> None:
        self.jobs = jobs
        self.owned: dict[str, list[str]] = {}

    def update(self, name: str, line: str) -> None:
        if ": owns " in line:
            listed = line.split(": owns ", 1)[1].split()[0]
            self.owned[name] = [] if listed == "-" else listed.split(",")

    def complete(self, names: set[str]) -> bool:
        held = [j for n in names for j in self.owned.get(n, [])]
        return sorted(held) == self.jobs and all(self.owned.get(n) for n in names)

    def show(self, names: set[str]) -> None:
        for n in sorted(names):
            say(f"   {n} owns {len(self.owned[n])}: {','.join(self.owned[n])}")


def main() -> None:
    parser = common_arguments(__doc__.splitlines()[1])
    parser.add_argument("--jobs", type=int, default=12, help="how many jobs to share")
    args = parser.parse_args()
    group = args.group or "herd-work-demo"
    jobs = [f"job-{i:02d}" for i in range(args.jobs)]
    if args.worker:
        worker(args.worker, args.bootstrap_server, group, args.session_timeout_ms, jobs)
        return
    say(f"== starting {args.workers} workers sharing {len(jobs)} jobs in group {group!r} ==")
    workers = Workers(os.path.abspath(__file__), args, group)
    ownership, alive = Ownership(jobs), set(workers.procs)

    def settled(name: str, line: str) -> bool:
        ownership.update(name, line)
        return ownership.complete(alive)

    workers.wait_for(settled, "every job owned once")
    say("== every job has one owner ==")
    ownership.show(alive)
    victim = sorted(alive)[0]
    say(f"== killing {victim} (SIGKILL) ==")
    workers.kill(victim)
    alive.discard(victim)
    killed_at = time.monotonic()
    workers.wait_for(settled, "the survivors to own every job")
    say(
        f"== {', '.join(sorted(alive))} took over {victim}'s jobs, {time.monotonic() - killed_at:.1f}s after "
        f"the kill =="
    )
    ownership.show(alive)
    workers.stop()


if __name__ == "__main__":
    main()
