"""A group's rebalance history, read through the read-only group config `herd.rebalance.history`.

`HistoryAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. The history is asked of the
group's coordinator (found again on NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS) with DescribeConfigs on a
GROUP resource naming the config; any broker of a herd cluster answers it too (it forwards the question to the
coordinator), as any Kafka client may ask. Its value is JSON: `{"group", "state", "rebalances": [entry, ...]
oldest first, "omitted"}`, each entry as herd's coordinator describes it (docs/observability.md; the fields and
causes are listed in herd.coordinator.history's docstring, which the client does not import). A broker that does
not keep the history (Kafka, an older herd) leaves the config out of its answer: AdminError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.admin_preregistration import describe_group_config
from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name

__all__ = ["HISTORY_CONFIG", "HistoryAdmin", "RebalanceHistory"]

HISTORY_CONFIG: Final = "herd.rebalance.history"


@dataclass(frozen=True, slots=True)
class RebalanceHistory:
    """The JSON answer, with its parts named: `rebalances` are dicts with the entry's fields."""

    group_id: str
    state: str
    rebalances: tuple[dict[str, Any], ...]
    omitted: int = 0

    @property
    def exists(self) -> bool:
        return self.state != "Dead" or bool(self.rebalances)


class HistoryAdmin:
    """`rebalance_history` (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def rebalance_history(self, group_id: str) -> RebalanceHistory:
        """The group's last rebalances, oldest first (none for a group that never rebalanced or does not exist:
        its `state` is then "Dead"). Raises AdminError when the broker refuses or does not keep the history."""
        result = await describe_group_config(self.client, group_id, HISTORY_CONFIG)
        if result.error_code:
            detail = f": {result.error_message}" if result.error_message else ""
            raise self.error_type(
                result.error_code,
                f"The rebalance history of group '{group_id}' could not be "
                f"read: {error_name(result.error_code)}{detail}",
            )
        value = next((c.value for c in result.configs if c.name == HISTORY_CONFIG), None)
        if value is None:
            raise self.error_type(
                ErrorCode.invalid_config, f"The broker keeps no rebalance history (no group config {HISTORY_CONFIG})."
            )
        try:
            return parse_history(group_id, value)
        except ValueError as e:
            raise self.error_type(ErrorCode.unknown_server_error, str(e)) from None


def parse_history(group_id: str, value: str) -> RebalanceHistory:
    """The config's JSON value; raises ValueError if it is not the shape herd answers."""
    data = json.loads(value)
    if not isinstance(data, dict) or not isinstance(data.get("rebalances"), list):
        raise ValueError(f"{HISTORY_CONFIG} of group '{group_id}' is not a history: {value[:80]!r}")
    return RebalanceHistory(
        str(data.get("group", group_id)),
        str(data.get("state", "")),
        tuple(data["rebalances"]),
        int(data.get("omitted", 0)),
    )
