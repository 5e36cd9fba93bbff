"""Pre-registered static members (KIP-469): the instance ids a group expects, and what they change.

An operator who scales a fleet of static members up by K instances names their `group.instance.id`s in
advance (the group config `herd.expected.instance.ids`, see group_configs.py). Every group has an
*expected set* in `ShardContext.expected` (group id -> ids in registration order); it may exist for a
group that does not exist yet, as a Kafka group config may. An id is *missing* while it is expected and
no member of the group holds it, and has *arrived* while it is expected and a member holds it. What it
changes (static.py and rebalance.py apply it):

- The hold (static.py): an expected instance that joins a Stable "consumer" group while other expected
  ids are still missing is admitted without a rebalance: it gets the current generation and an empty
  assignment (the consumer protocol's, encoded by the coordinator), the new membership is persisted as
  a static replacement is, and the existing members keep consuming their partitions. The rebalance
  starts when the last missing id joins (the normal new-member path), when the operator withdraws the
  missing ids, or at the end of the hold, the rebalance timeout after the first arrival, which releases
  the ids still missing. So K arrivals cost one rebalance and the partitions stay owned while the new
  instances boot. (Other protocol types, whose assignment format the coordinator cannot write, and
  groups that are not Stable take the join-phase path below.) A held member that restarts is replaced
  like any static member (KIP-345, no rebalance); one that leaves or times out starts a rebalance, as in
  Kafka, whose join phase then waits for it like any missing id.
- While a rebalance's join phase has members and some expected id is missing, the phase does not end
  early: it waits for the missing ids as it waits for members that have not rejoined, and like them it
  is bounded by the join timer (the rebalance timeout; for a group that was Empty, KIP-134's initial
  delay extended up to the rebalance timeout). Members that are not expected behave as before.
- When the last missing id arrives (its JoinGroup is accepted) or is withdrawn by the operator, and
  every member has rejoined, the phase ends at once, even inside KIP-134's initial delay: the
  operator has said whom to wait for.
- A registration is *fulfilled* when a generation that includes it is persisted (the leader's
  SyncGroup, in the same batch as the GroupMetadata record); it is then dropped from the set.
- A registration is *released* when a join phase ends at its timer while the id is still missing: the
  ids are logged and dropped, so a stale or mistyped registration delays one rebalance by at most the
  rebalance timeout, never every rebalance after it.

Registering an id that is already a member of the group is a no-op (it has arrived). Persistence: one
record per group of herd's type 0x7E00 (records.py) holding the whole set, a tombstone when it empties,
written like the classic-group records: the handler changes the set in memory and emits the record with
`applied=True`; records read back from the log rebuild the set through `replay`. A failed append puts
the previous set back (the rollback hook). The set survives DeleteGroups, as a Kafka group config does.
"""

from __future__ import annotations

import logging
import re

from herd.coordinator.context import ShardContext
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.group import ClassicGroup
from herd.coordinator.records import (
    Record,
    decode_expected_members_key,
    decode_expected_members_value,
    expected_members_record,
)
from herd.coordinator.result import EMPTY, Effects, Result

log = logging.getLogger(__name__)

EMPTY_CONSUMER_ASSIGNMENT = b"\x00\x00" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff"
"""ConsumerProtocolAssignment v0 with no partitions and null user data: what a held member is given."""

CONFIG_NAME = "herd.expected.instance.ids"
MAX_EXPECTED_INSTANCES = 1000
"""At most this many pre-registered ids per group (keeps the record far below a batch's size limit)."""
MAX_INSTANCE_ID_LENGTH = 249
_LEGAL_ID = re.compile(r"[a-zA-Z0-9._-]+")
DOCUMENTATION = (
    "The group.instance.ids of static members expected to join (KIP-469 pre-registration): while any is "
    "missing, a rebalance waits for it, up to the rebalance timeout; when the last one joins, the rebalance "
    "proceeds at once. Comma-separated; SET replaces, APPEND and SUBTRACT add and remove ids, DELETE clears."
)


# --- validation -------------------------------------------------------------------------------------


def validate_instance_id(instance_id: str) -> None:
    """Kafka's client-side rule for group.instance.id (JoinGroupRequest.validateGroupInstanceId): 1-249
    characters of [a-zA-Z0-9._-]. Raises CoordinatorError(INVALID_CONFIG)."""
    if not instance_id:
        raise CoordinatorError(ErrorCode.invalid_config, f"{CONFIG_NAME}: an instance id cannot be empty")
    if len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise CoordinatorError(
            ErrorCode.invalid_config,
            f"{CONFIG_NAME}: instance id {instance_id[:40]!r}... is longer than {MAX_INSTANCE_ID_LENGTH} characters",
        )
    if not _LEGAL_ID.fullmatch(instance_id):
        raise CoordinatorError(
            ErrorCode.invalid_config,
            f"{CONFIG_NAME}: instance id {instance_id!r} contains "
            "a character other than ASCII alphanumerics, '.', '_' "
            "and '-'",
        )


def parse_ids(value: str | None) -> tuple[str, ...]:
    """A comma list (Kafka's LIST type: items trimmed, "" is the empty list) of valid ids, duplicates
    dropped, order kept. Raises CoordinatorError(INVALID_CONFIG)."""
    if value is None:
        raise CoordinatorError(ErrorCode.invalid_config, f"{CONFIG_NAME}: this operation needs a value")
    if not value.strip():
        return ()
    ids = [item.strip() for item in value.split(",")]
    if len(ids) > MAX_EXPECTED_INSTANCES:
        raise too_many(len(ids))
    for instance_id in ids:
        validate_instance_id(instance_id)
    return tuple(dict.fromkeys(ids))


def too_many(n: int) -> CoordinatorError:
    return CoordinatorError(
        ErrorCode.invalid_config,
        f"{CONFIG_NAME}: at most {MAX_EXPECTED_INSTANCES} pre-registered instances per group, got {n}",
    )


# --- queries ----------------------------------------------------------------------------------------


def expected(ctx: ShardContext, group_id: str) -> tuple[str, ...]:
    return ctx.expected.get(group_id, ())


def is_expected(ctx: ShardContext, group_id: str, instance_id: str | None) -> bool:
    return instance_id is not None and instance_id in ctx.expected.get(group_id, ())


def missing(ctx: ShardContext, group: ClassicGroup) -> list[str]:
    """Expected ids that no member of `group` holds, in registration order."""
    ids = ctx.expected.get(group.group_id)
    if not ids:
        return []
    return [i for i in ids if i not in group.static_members]


def arrived(ctx: ShardContext, group: ClassicGroup) -> list[str]:
    """Expected ids that members hold (they joined; no persisted generation includes them yet)."""
    return [i for i in ctx.expected.get(group.group_id, ()) if i in group.static_members]


def hold_key(group_id: str) -> str:
    return f"expected-members-{group_id}"


def end_hold(ctx: ShardContext, group_id: str) -> None:
    """A rebalance starts (or the hold timed out): arrivals are no longer held."""
    if ctx.expected_holds.pop(group_id, None) is not None:
        ctx.timer.cancel(hold_key(group_id))


def waiting_for(ctx: ShardContext, group_id: str) -> tuple[str, ...]:
    """What the group is still waiting for: the expected ids that are not members (all, for no group)."""
    group = ctx.groups.get(group_id)
    ids = expected(ctx, group_id)
    return ids if group is None else tuple(i for i in ids if i not in group.static_members)


# --- changes ----------------------------------------------------------------------------------------


def change(ctx: ShardContext, group_id: str, ids: tuple[str, ...], fx: Effects) -> None:
    """Set the group's expected ids now; emit their record; put the old ones back if it is not appended."""
    old = expected(ctx, group_id)
    _store(ctx, group_id, ids)
    fx.records.append(expected_members_record(group_id, ids, applied=True))
    fx.on_failure(lambda _error: _restore(ctx, group_id, ids, old))


def _store(ctx: ShardContext, group_id: str, ids: tuple[str, ...]) -> None:
    if ids:
        ctx.expected[group_id] = ids
    else:
        ctx.expected.pop(group_id, None)


def _restore(ctx: ShardContext, group_id: str, written: tuple[str, ...], old: tuple[str, ...]) -> Result:
    if expected(ctx, group_id) == written:
        _store(ctx, group_id, old)
    return EMPTY


def fulfil(ctx: ShardContext, group: ClassicGroup, fx: Effects) -> None:
    """A generation with these members is being persisted: drop the ids that have arrived."""
    ids = expected(ctx, group.group_id)
    remaining = tuple(i for i in ids if i not in group.static_members)
    if remaining != ids:
        log.info(
            "group %s: pre-registered instances %s are in generation %d",
            group.group_id,
            [i for i in ids if i in group.static_members],
            group.generation_id,
        )
        change(ctx, group.group_id, remaining, fx)


def release(ctx: ShardContext, group: ClassicGroup, absent: list[str], fx: Effects) -> None:
    """The join phase ended at its timer without `absent`: log them and drop their registration."""
    log.warning(
        "group %s: the join phase ended at the rebalance timeout without pre-registered instances %s; "
        "their pre-registration is dropped",
        group.group_id,
        absent,
    )
    gone = set(absent)
    change(ctx, group.group_id, tuple(i for i in expected(ctx, group.group_id) if i not in gone), fx)


# --- replay -----------------------------------------------------------------------------------------


def replay(ctx: ShardContext, record: Record) -> None:
    """A record read back from the log (raises ValueError for an unreadable one)."""
    group_id = decode_expected_members_key(record.key).group
    ids = () if record.value is None else decode_expected_members_value(record.value)
    _store(ctx, group_id, tuple(ids))
