"""Pre-registration of static members (KIP-469) through the group config `herd.expected.instance.ids`.

`PreregistrationAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. Registrations are
changed with IncrementalAlterConfigs on a GROUP resource (APPEND to add ids, SUBTRACT to remove them, SET to
replace them all, DELETE to clear them) and read with DescribeConfigs, whose value is what the group still
waits for: the pre-registered ids that are not members yet. Both go to the group's coordinator (found again
on NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS). A broker without the config (Kafka, an older herd)
refuses the change with AdminError and reads as "nothing expected".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from kio.schema.errors import ErrorCode

from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name
from herd.client.wire import RequestBuilder

__all__ = ["EXPECTED_MEMBERS_CONFIG", "PreregistrationAdmin"]

EXPECTED_MEMBERS_CONFIG: Final = "herd.expected.instance.ids"
INCREMENTAL_ALTER_CONFIGS: Final = 44
DESCRIBE_CONFIGS: Final = 32
GROUP_RESOURCE: Final = 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class PreregistrationAdmin:
    """KIP-469 operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def add_expected_members(self, group_id: str, instance_ids: Sequence[str]) -> tuple[str, ...]:
        """Pre-register static members (idempotent); returns the ids the group now waits for. Ids already
        in the group are not registered: they have arrived. Raises AdminError (e.g. INVALID_CONFIG)."""
        await self._alter_expected(group_id, APPEND, self._joined(instance_ids))
        return await self.expected_members(group_id)

    async def remove_expected_members(
        self, group_id: str, instance_ids: Sequence[str] | None = None
    ) -> tuple[str, ...]:
        """Withdraw pre-registrations (all of them when `instance_ids` is None); returns what is left."""
        if instance_ids is None:
            await self._alter_expected(group_id, DELETE, None)
        else:
            await self._alter_expected(group_id, SUBTRACT, self._joined(instance_ids))
        return await self.expected_members(group_id)

    async def set_expected_members(self, group_id: str, instance_ids: Sequence[str]) -> tuple[str, ...]:
        """Replace the group's pre-registrations; returns the ids the group now waits for."""
        await self._alter_expected(group_id, SET, self._joined(instance_ids, allow_empty=True))
        return await self.expected_members(group_id)

    async def expected_members(self, group_id: str, *, strict: bool = True) -> tuple[str, ...]:
        """The pre-registered ids the group still waits for. With strict=False a broker that cannot tell
        (no such config or resource type) reads as (); otherwise its error raises AdminError."""
        try:
            value = await self._describe_expected(group_id)
        except KafkaError:
            if strict:
                raise
            return ()
        return tuple(i for i in (value or "").split(",") if i)

    def _joined(self, instance_ids: Sequence[str], allow_empty: bool = False) -> str:
        ids = list(instance_ids)
        if not ids and not allow_empty:
            raise self.error_type(ErrorCode.invalid_config, "no group.instance.id given")
        for i in ids:
            if not i or "," in i:
                raise self.error_type(ErrorCode.invalid_config, f"invalid group.instance.id {i!r}")
        return ",".join(ids)

    async def _alter_expected(self, group_id: str, operation: int, value: str | None) -> None:
        def build(b: RequestBuilder) -> Any:
            config = b("AlterableConfig", name=EXPECTED_MEMBERS_CONFIG, config_operation=operation, value=value)
            resource = b(
                "AlterConfigsResource", resource_type=GROUP_RESOURCE, resource_name=group_id, configs=(config,)
            )
            return b.request(resources=(resource,), validate_only=False)

        _, body = await self.client.call_coordinator(
            group_id, INCREMENTAL_ALTER_CONFIGS, build, lambda v, body: int(body.responses[0].error_code)
        )
        result = body.responses[0]
        if result.error_code:
            raise self._error(group_id, result.error_code, result.error_message)

    async def _describe_expected(self, group_id: str) -> str | None:
        result = await describe_group_config(self.client, group_id, EXPECTED_MEMBERS_CONFIG)
        if result.error_code:
            raise self._error(group_id, result.error_code, result.error_message)
        return next((c.value for c in result.configs if c.name == EXPECTED_MEMBERS_CONFIG), None)

    def _error(self, group_id: str, code: int, message: str | None) -> KafkaError:
        detail = f": {message}" if message else ""
        return self.error_type(
            code, f"Pre-registration of members of group '{group_id}' failed: {error_name(code)}{detail}"
        )


async def describe_group_config(client: KafkaClient, group_id: str, name: str) -> Any:
    """DescribeConfigs of the group config `name`, asked of the group's coordinator: the group's result (its
    error_code, error_message and configs), for the caller to read or to raise on in its own words."""

    def build(b: RequestBuilder) -> Any:
        resource = b(
            "DescribeConfigsResource", resource_type=GROUP_RESOURCE, resource_name=group_id, configuration_keys=(name,)
        )
        return b.request(resources=(resource,), include_synonyms=False, include_documentation=False)

    _, body = await client.call_coordinator(
        group_id, DESCRIBE_CONFIGS, build, lambda v, body: int(body.results[0].error_code)
    )
    return body.results[0]
