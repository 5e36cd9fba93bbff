"""ACL administration (kafka-acls.sh's --add, --list and --remove): CreateAcls, DescribeAcls and DeleteAcls.

`AclAdmin` is mixed into herd.client.admin.Admin; it needs only `self.client`. The enums (herd.protocol.acl_codes) carry
Kafka's codes and names. An `AclBinding` is
one ACL: a resource pattern (type, name, LITERAL or PREFIXED) and an entry (principal `User:alice`, host `*` or
an address, operation, ALLOW or DENY). An `AclFilter` matches bindings: ANY (or None for a string) matches
everything, and the pattern type MATCH matches every pattern that applies to the name (the literal name, `*`, and
the prefixes of it), as Kafka's ResourcePatternFilter does. Every request goes to any broker; errors raise the
admin's error type with the broker's message (SECURITY_DISABLED when no authorizer is configured).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from herd.client.connection import KafkaClient
from herd.client.errors import KafkaError, error_name
from herd.client.wire import RequestBuilder
from herd.protocol.acl_codes import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType

__all__ = [
    "CLUSTER_NAME",
    "AclAdmin",
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourceType",
]

DESCRIBE_ACLS: Final = 29
CREATE_ACLS: Final = 30
DELETE_ACLS: Final = 31


def _enum(cls: type[enum.IntEnum], value: int) -> Any:
    try:
        return cls(value)
    except ValueError:
        return cls(0)  # UNKNOWN, as Kafka's fromCode


@dataclass(frozen=True, slots=True, order=True)  # ordered by resource, then entry: its fields' order
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __post_init__(self) -> None:
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"an ACL's pattern type is LITERAL or PREFIXED, not {self.pattern_type.name}")
        for name, value, bad in (
            ("resource type", self.resource_type, (ResourceType.ANY, ResourceType.UNKNOWN)),
            ("operation", self.operation, (AclOperation.ANY, AclOperation.UNKNOWN)),
            ("permission", self.permission, (AclPermissionType.ANY, AclPermissionType.UNKNOWN)),
        ):
            if value in bad:
                raise ValueError(f"an ACL's {name} cannot be {value.name}")

    def as_dict(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.name,
            "permission": self.permission.name,
            "resource_type": self.resource_type.name,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.name,
        }


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Which ACLs to list or delete; the defaults match every ACL."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY


def _binding(resource: Any, acl: Any) -> AclBinding:
    return AclBinding(
        _enum(ResourceType, int(resource.resource_type)),
        resource.resource_name,
        _enum(PatternType, int(resource.pattern_type)),
        acl.principal,
        acl.host,
        _enum(AclOperation, int(acl.operation)),
        _enum(AclPermissionType, int(acl.permission_type)),
    )


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


class AclAdmin:
    """ACL operations (see the module docstring)."""

    client: KafkaClient
    error_type: type[KafkaError] = KafkaError

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Create every binding (one that exists already is no change); raises the first binding's error."""

        def build(b: RequestBuilder) -> Any:
            return b.request(
                creations=tuple(
                    b(
                        "AclCreation",
                        resource_type=int(a.resource_type),
                        resource_name=a.resource_name,
                        resource_pattern_type=int(a.pattern_type),
                        principal=a.principal,
                        host=a.host,
                        operation=int(a.operation),
                        permission_type=int(a.permission),
                    )
                    for a in bindings
                )
            )

        if not bindings:
            return
        _, body = await self.client.send(CREATE_ACLS, build)
        for binding, result in zip(bindings, body.results):
            if result.error_code:
                raise self.error_type(
                    result.error_code,
                    f"Cannot add ACL {_describe(binding)}: {result.error_message or error_name(result.error_code)}",
                )

    async def describe_acls(self, acl_filter: AclFilter = AclFilter()) -> list[AclBinding]:
        """The ACLs matching the filter, sorted by resource, then principal, host, operation and permission."""
        _, body = await self.client.send(DESCRIBE_ACLS, lambda b: b.request(**_filter_fields(acl_filter)))
        if body.error_code:
            raise self.error_type(
                body.error_code, body.error_message or f"Listing ACLs failed: {error_name(body.error_code)}"
            )
        return sorted(_binding(r, a) for r in body.resources for a in r.acls)

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclBinding]:
        """Delete every ACL matching any of the filters; returns those deleted (sorted); raises the first error."""

        def build(b: RequestBuilder) -> Any:
            return b.request(filters=tuple(b("DeleteAclsFilter", **_filter_fields(f)) for f in filters))

        if not filters:
            return []
        _, body = await self.client.send(DELETE_ACLS, build)
        deleted: dict[AclBinding, None] = {}
        for result in body.filter_results:
            if result.error_code:
                raise self.error_type(
                    result.error_code, result.error_message or f"Removing ACLs failed: {error_name(result.error_code)}"
                )
            for m in result.matching_acls:
                if m.error_code:
                    raise self.error_type(
                        m.error_code, m.error_message or f"Removing ACLs failed: {error_name(m.error_code)}"
                    )
                deleted[_binding(m, m)] = None
        return sorted(deleted)


def _describe(a: AclBinding) -> str:
    return (
        f"({a.principal} {a.permission.name} {a.operation.name} from {a.host} on "
        f"{a.resource_type.name} {a.pattern_type.name} '{a.resource_name}')"
    )
