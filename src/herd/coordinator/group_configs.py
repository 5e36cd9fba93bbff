"""Group configs: IncrementalAlterConfigs and DescribeConfigs on a GROUP resource, as Kafka 4.x serves them:
Kafka's own group configs (consumer.session.timeout.ms and the others of kafka_group_configs.py), herd's group
config `herd.expected.instance.ids` (KIP-469, preregistration.py), and the read-only `herd.rebalance.history`
(history.py).

Alter (Kafka's rules for one resource, all or nothing): an empty group id is INVALID_REQUEST ("Default
group resources are not allowed."); a config named twice is INVALID_REQUEST; an unknown operation is
INVALID_REQUEST; a name that is none of these is INVALID_CONFIG "Unknown group config name: x". Kafka's
configs: SET and DELETE; APPEND and SUBTRACT are INVALID_CONFIG (none is a LIST); the group's whole set of
overrides after the change is then validated as Kafka's controller does (kafka_group_configs.validate) and stored
in a 0x7E02 record (records.py), as the expected ids are, rolled back if the record is not appended.
Expected ids: an invalid id, a missing value or more than MAX_EXPECTED_INSTANCES ids is INVALID_CONFIG. SET
replaces the list, APPEND adds the ids not present, SUBTRACT removes the ids present (absent ones are ignored),
DELETE clears it. New ids that are already members of the group are dropped (they have arrived). A group that
does not exist may be configured (Kafka 4.x stores configs of groups that do not exist; they apply when the group
forms). `validate_only` checks and changes nothing. A change that leaves a set as it was writes nothing, so
repeating a request is harmless. When a change withdraws the last missing id of a join phase that waits
only for it, the phase ends at once; when it withdraws the last missing id of a hold, the held members are
rebalanced in at once.

Describe: every Kafka group config with the value in force (the group's override, else the broker's default) and
`is_set` for an override (GROUP_CONFIG, else DEFAULT_CONFIG, as ConfigHelper.createGroupConfigEntry); then
`herd.expected.instance.ids`, whose value is the ids the group is still waiting for (expected and not members),
comma-separated, `is_set` telling whether the group has a registration at all. Asked for by name (and only then: it
is not listed with every config, so that kafka-configs.sh --describe stays readable), `herd.rebalance.history`
answers the group's rebalance history as JSON, `{"group": id, "state": its state ("Dead" when it does not exist),
"rebalances": [history.Rebalance.to_json(), ...] oldest first, "omitted": how many of the oldest were left out to
keep the value under MAX_HISTORY_JSON bytes}`. It is read-only: altering it is INVALID_REQUEST "Cannot update these
configs dynamically: Set(herd.rebalance.history)", Kafka's answer to a read-only broker config
(DynamicBrokerConfig.validateConfigs, KAFKA-13609).

List (ListConfigResources on GROUP): the groups that have a config set (an override or a registration), as Kafka
lists the groups its GroupConfigManager holds configs for; whether the group exists does not matter.
"""

from __future__ import annotations

import json
from enum import IntEnum

from herd.coordinator import kafka_group_configs as kafka
from herd.coordinator import preregistration as prereg
from herd.coordinator import rebalance as rb
from herd.coordinator import static
from herd.coordinator.context import ShardContext
from herd.coordinator.errors import CoordinatorError, ErrorCode
from herd.coordinator.records import Record, decode_group_config_key, decode_group_config_value, group_config_record
from herd.coordinator.requests import AlterGroupConfigs, DescribeGroupConfigs, GroupConfigOp, ListConfiguredGroups
from herd.coordinator.responses import (
    AlterGroupConfigsResponse,
    DescribeGroupConfigsResponse,
    GroupConfigEntry,
    ListConfiguredGroupsResponse,
)
from herd.coordinator.result import EMPTY, Effects, Result
from herd.coordinator.state import GroupState

HISTORY_CONFIG = "herd.rebalance.history"
MAX_HISTORY_JSON = 512 * 1024
MAX_LEGACY_STRING = 32767  # a non-flexible version's STRING (DescribeConfigs v0-3)
HISTORY_DOCUMENTATION = (
    "Read-only: the group's last rebalances as JSON (cause, the member that started it, join and sync phases, "
    "late and dropped members, assignment sizes), oldest first; herd.group.rebalance.history.size of them."
)


class OpType(IntEnum):
    """Kafka's AlterConfigOp.OpType."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def alter(ctx: ShardContext, req: AlterGroupConfigs, handle: object) -> Result:
    fx = Effects()
    try:
        ids, overrides = _altered(ctx, req)
    except CoordinatorError as e:
        fx.reply(handle, AlterGroupConfigsResponse(error_code=e.code, error_message=_message(e)))
        return fx.result()
    if not req.validate_only:
        if ids != prereg.expected(ctx, req.group_id):
            _apply(ctx, req.group_id, ids, fx)
        if overrides != ctx.group_configs.get(req.group_id, {}):
            _change_configs(ctx, req.group_id, overrides, fx)
    fx.reply(handle, AlterGroupConfigsResponse())
    return fx.result()


def _message(error: CoordinatorError) -> str:
    return str(error).removeprefix(f"{error.code.name.upper()}: ")


def _altered(ctx: ShardContext, req: AlterGroupConfigs) -> tuple[tuple[str, ...], dict[str, str]]:
    """The expected ids and the Kafka group config overrides after `req.ops`; raises CoordinatorError."""
    if not req.group_id:
        raise CoordinatorError(ErrorCode.invalid_request, "Default group resources are not allowed.")
    names = [op.name for op in req.ops]
    if len(set(names)) != len(names):
        raise CoordinatorError(ErrorCode.invalid_request, "Error due to duplicate config keys")
    before = ids = prereg.expected(ctx, req.group_id)
    overrides = dict(ctx.group_configs.get(req.group_id, {}))
    for op in req.ops:
        if op.operation not in OpType.__members__.values():
            raise CoordinatorError(ErrorCode.invalid_request, f"Unknown operation type {op.operation} for {op.name}")
        if op.name == HISTORY_CONFIG:
            raise CoordinatorError(
                ErrorCode.invalid_request, f"Cannot update these configs dynamically: Set({op.name})"
            )
        if op.name == prereg.CONFIG_NAME:
            ids = _apply_op(ids, op)
        else:
            _apply_config_op(overrides, op)
    kafka.validate(overrides, ctx.config)
    group = ctx.groups.get(req.group_id)
    if group is not None:  # new ids that are members have arrived already; arrived ones stay until fulfilled
        ids = tuple(i for i in ids if i in before or i not in group.static_members)
    if len(ids) > prereg.MAX_EXPECTED_INSTANCES:
        raise prereg.too_many(len(ids))
    return ids, overrides


def _apply_config_op(overrides: dict[str, str], op: GroupConfigOp) -> None:
    """One operation on a Kafka group config (or an unknown name, refused as Kafka's validator refuses it).
    None of them is a LIST, so APPEND and SUBTRACT are refused in the KRaft controller's words
    (ConfigurationControlManager.incrementalAlterConfigResource)."""
    if op.name not in kafka.BY_NAME:
        raise CoordinatorError(ErrorCode.invalid_config, f"Unknown group config name: {op.name}")
    kind = OpType(op.operation)
    if kind in (OpType.APPEND, OpType.SUBTRACT):
        raise CoordinatorError(
            ErrorCode.invalid_config, f"Can't {kind.name} to key {op.name} because its type is not LIST."
        )
    if kind is OpType.DELETE:
        overrides.pop(op.name, None)
    elif op.value is None:
        raise CoordinatorError(ErrorCode.invalid_config, f"Null value not supported for group configs: {op.name}")
    else:
        overrides[op.name] = op.value


def _apply_op(ids: tuple[str, ...], op: GroupConfigOp) -> tuple[str, ...]:
    kind = OpType(op.operation)
    if kind is OpType.DELETE:
        return ()
    given = prereg.parse_ids(op.value)
    if kind is OpType.SET:
        return given
    if kind is OpType.APPEND:
        return tuple(dict.fromkeys(ids + given))
    drop = set(given)
    return tuple(i for i in ids if i not in drop)


def _change_configs(ctx: ShardContext, group_id: str, overrides: dict[str, str], fx: Effects) -> None:
    """Store the group's overrides now; emit their record; put the old ones back if it is not appended."""
    old = ctx.group_configs.get(group_id)
    _store_configs(ctx, group_id, overrides)
    fx.records.append(group_config_record(group_id, overrides, applied=True))

    def restore(_error: object) -> Result:
        if ctx.group_configs.get(group_id) == (overrides or None):
            _store_configs(ctx, group_id, old or {})
        return EMPTY

    fx.on_failure(restore)


def _store_configs(ctx: ShardContext, group_id: str, overrides: dict[str, str]) -> None:
    if overrides:
        ctx.group_configs[group_id] = overrides
    else:
        ctx.group_configs.pop(group_id, None)


def replay(ctx: ShardContext, record: Record) -> None:
    """A 0x7E02 record read back from the log (raises ValueError for an unreadable one)."""
    group_id = decode_group_config_key(record.key).group
    _store_configs(ctx, group_id, {} if record.value is None else decode_group_config_value(record.value))


def _apply(ctx: ShardContext, group_id: str, ids: tuple[str, ...], fx: Effects) -> None:
    """Store the new set; a join phase that was waiting only for withdrawn ids ends now."""
    group = ctx.groups.get(group_id)
    waiting = group is not None and group.is_in(GroupState.PREPARING_REBALANCE)
    was_held = waiting and group is not None and bool(prereg.missing(ctx, group))
    prereg.change(ctx, group_id, ids, fx)
    if group is None:
        return
    if was_held and group.members and rb.all_joined(ctx, group):
        rb.complete_join(ctx, group, fx, "config-change")
    static.end_hold_now(ctx, group, fx)


def describe(ctx: ShardContext, req: DescribeGroupConfigs, handle: object) -> Result:
    fx = Effects()
    if not req.group_id:
        fx.reply(
            handle,
            DescribeGroupConfigsResponse(
                error_code=ErrorCode.invalid_request, error_message="Default group resources are not allowed."
            ),
        )
        return fx.result()
    entries = [
        GroupConfigEntry(d.name, value, is_set, d.documentation, kind=d.kind)
        for d, value, is_set in kafka.effective(ctx.group_configs.get(req.group_id, {}), ctx.config)
    ]
    entries += [
        GroupConfigEntry(
            prereg.CONFIG_NAME,
            ",".join(prereg.waiting_for(ctx, req.group_id)),
            bool(prereg.expected(ctx, req.group_id)),
            prereg.DOCUMENTATION,
        )
    ]
    if req.include_history:
        # DescribeConfigs below v4 is not flexible: its strings hold at most 32,767 bytes
        limit = MAX_HISTORY_JSON if req.api_version >= 4 else MAX_LEGACY_STRING
        entries.append(
            GroupConfigEntry(
                HISTORY_CONFIG,
                history_json(ctx, req.group_id, limit),
                bool(ctx.history.of(req.group_id)),
                HISTORY_DOCUMENTATION,
                read_only=True,
                kind="string",
            )
        )
    fx.reply(handle, DescribeGroupConfigsResponse(configs=tuple(entries)))
    return fx.result()


def history_json(ctx: ShardContext, group_id: str, limit: int | None = None) -> str:
    """The value of `herd.rebalance.history` (see the module docstring): at most `limit` bytes, the oldest entries
    left out first; an entry that alone exceeds it is left out too (entries are bounded by history.py's limits,
    but one can exceed the 32,767 bytes of a legacy string)."""
    limit = MAX_HISTORY_JSON if limit is None else limit
    group = ctx.groups.get(group_id)
    consumer_group = ctx.consumer_groups.get(group_id)
    if group is not None:
        state = str(group.state)
    else:
        state = consumer_group.state.value if consumer_group is not None else str(GroupState.DEAD)
    entries = [json.dumps(e.to_json(), separators=(",", ":")) for e in ctx.history.of(group_id)]
    head = json.dumps({"group": group_id, "state": state}, separators=(",", ":"))[:-1]
    omitted, size = 0, len(head) + 32 + sum(len(e.encode()) + 1 for e in entries)
    while omitted < len(entries) and size > limit:
        size -= len(entries[omitted].encode()) + 1
        omitted += 1
    return f'{head},"rebalances":[{",".join(entries[omitted:])}],"omitted":{omitted}}}'


def configured(ctx: ShardContext, req: ListConfiguredGroups, handle: object) -> Result:
    fx = Effects()
    fx.reply(handle, ListConfiguredGroupsResponse(group_ids=tuple(sorted(set(ctx.expected) | set(ctx.group_configs)))))
    return fx.result()
