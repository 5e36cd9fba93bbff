"""ACLs and the decision whether a principal may do an operation on a resource: Kafka's StandardAuthorizer, pure.

An ACL binds a resource pattern (resource type, name, LITERAL or PREFIXED; the LITERAL name "*" is every resource
of its type) to an entry (principal "Type:name" or "User:*", host or "*", operation, ALLOW or DENY). A request
(principal, host, operation, resource type, name) is decided as apache/kafka
metadata/src/main/java/org/apache/kafka/metadata/authorizer/StandardAuthorizerData.java does:

- a super user (super.users) may do everything;
- the ACLs that apply to the resource are its LITERAL ACLs, the LITERAL "*" ACLs of its type, and the PREFIXED
  ACLs whose name is a prefix of its name;
- of those, the ones whose principal is the request's or "User:*" and whose host is the request's or "*" count:
  a DENY for the operation (or ALL) denies, whatever else allows (deny wins); an ALLOW for the operation, for ALL,
  or for an operation that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS; implications apply to ALLOW only) allows;
- when no ACL at all applies to the resource (whoever it names), allow.everyone.if.no.acl.found decides; when
  some apply but none allows, the answer is no.

`authorize_by_resource_type` answers "may the principal do the operation on some resource of this type", as the
default method of apache/kafka clients/src/main/java/org/apache/kafka/server/authorizer/Authorizer.java
authorizeByResourceType (used for idempotent producers in InitProducerId).

The index (`Authorizer`) keeps, per resource type, the LITERAL ACLs by name and the PREFIXED ones by name with the
names in a sorted list, and under each name by principal. The PREFIXED names that are prefixes of a name are found
by bisection, each step jumping below the last candidate or to the longest prefix it shares with the name, as
StandardAuthorizerData walks its sorted set; while the PREFIXED names have few distinct lengths (LENGTHS_MAX), one
dict lookup per length is cheaper and is used instead. A decision therefore costs a few dict lookups (plus
O(log n) per matching prefix on the walk) and looks only at the ACLs of the request's principal and User:*,
however many ACLs there are. Decisions are cached
per (principal, host, operation, resource) until the ACLs change (the cache is bounded).

Codes are Kafka's (herd.protocol.acl_codes, shared with the client), as the wire and herd_acls carry them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from herd.protocol.acl_codes import CLUSTER_NAME, WILDCARD, PatternType, ResourceType
from herd.protocol.acl_codes import AclOperation as Operation
from herd.protocol.acl_codes import AclPermissionType as Permission

WILDCARD_PRINCIPAL = "User:*"


_O = Operation
# the operations each resource type supports (apache/kafka core/src/main/scala/kafka/security/authorizer/
# AclEntry.scala supportedOperations): what authorized_operations answers about
SUPPORTED: dict[int, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ,
        _O.WRITE,
        _O.CREATE,
        _O.DESCRIBE,
        _O.DELETE,
        _O.ALTER,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        _O.CREATE,
        _O.CLUSTER_ACTION,
        _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
        _O.IDEMPOTENT_WRITE,
        _O.ALTER,
        _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}

# operation -> the ALLOWed operations that imply it besides itself and ALL (StandardAuthorizerData
# IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS)
# (plain ints: they hash and compare faster than the enums, which matters in the decision's inner loop)
_GRANTING: dict[int, frozenset[int]] = {int(op): frozenset((int(op), 2)) for op in Operation}
_GRANTING[_O.DESCRIBE] = frozenset(int(op) for op in (_O.DESCRIBE, _O.ALL, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER))
_GRANTING[_O.DESCRIBE_CONFIGS] = frozenset(int(op) for op in (_O.DESCRIBE_CONFIGS, _O.ALL, _O.ALTER_CONFIGS))
_DENYING: dict[int, frozenset[int]] = {int(op): frozenset((int(op), 2)) for op in Operation}
_DENY = int(Permission.DENY)


@dataclass(frozen=True, slots=True, order=True)
class Acl:
    """One ACL binding (Kafka's AclBinding: a ResourcePattern and an AccessControlEntry), with Kafka's codes."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def __post_init__(self) -> None:
        # codes as plain ints (not enums, nor kio's int types): an enum hashes through a Python-level __hash__,
        # which the decision's inner loop would pay for at every test
        for name in ("resource_type", "pattern_type", "operation", "permission"):
            value = getattr(self, name)
            if type(value) is not int:
                object.__setattr__(self, name, int(value))
        for name in ("resource_name", "principal", "host"):
            value = getattr(self, name)
            if type(value) is not str:
                object.__setattr__(self, name, str(value))

    def problem(self) -> str | None:
        """Why this ACL cannot be created (INVALID_REQUEST), else None: the checks of apache/kafka
        metadata/src/main/java/org/apache/kafka/controller/AclControlManager.java validateNewAcl and of
        core/src/main/scala/kafka/server/AclApis.scala handleCreateAcls; herd also refuses the PREFIXED "*"
        (a prefix of nothing but names starting with "*", almost certainly meant as the LITERAL wildcard) and an
        empty host (which no client has)."""
        if self.resource_type not in SUPPORTED:
            return f"Invalid resourceType {_name(ResourceType, self.resource_type)}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {_name(PatternType, self.pattern_type)}"
        if not _known(Operation, self.operation) or self.operation in (Operation.ANY, Operation.UNKNOWN):
            return f"Invalid operation {_name(Operation, self.operation)}"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return f"Invalid permissionType {_name(Permission, self.permission)}"
        if not self.resource_name:
            return "Invalid empty resource name"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if self.pattern_type == PatternType.PREFIXED and self.resource_name == WILDCARD:
            return "A PREFIXED pattern cannot be the wildcard '*': use a LITERAL '*' for every resource"
        if ":" not in self.principal:
            return (
                f"Could not parse principal from `{self.principal}` (no colon is present separating the "
                f"principal type from the principal name)"
            )
        if not self.host:
            return "Invalid empty host"
        return None


def _known(enum: type[IntEnum], code: int) -> bool:
    return code in enum._value2member_map_


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None for a name, principal or host matches any; ANY for a code matches any;
    the pattern type MATCH matches the ACLs that would apply to the named resource (LITERAL of that name or "*",
    PREFIXED of a prefix of it). Matching follows apache/kafka clients/src/main/java/org/apache/kafka/common/
    resource/ResourcePatternFilter.java and common/acl/AccessControlEntryFilter.java."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = Operation.ANY
    permission: int = Permission.ANY

    def problem(self) -> str | None:
        """Why the filter cannot be used (INVALID_REQUEST): an UNKNOWN or unknown code anywhere."""
        for label, enum, code in (
            ("ResourceType", ResourceType, self.resource_type),
            ("PatternType", PatternType, self.pattern_type),
            ("Operation", Operation, self.operation),
            ("Permission", Permission, self.permission),
        ):
            if not _known(enum, code) or code == 0:
                return f"The filter has an unknown {label} ({code})"
        return None

    def matches(self, acl: Acl) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pattern = self.pattern_type
        if pattern not in (PatternType.ANY, PatternType.MATCH) and pattern != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pattern in (PatternType.ANY, acl.pattern_type):
            return name == acl.resource_name
        if acl.pattern_type == PatternType.LITERAL:  # MATCH
            return name == acl.resource_name or acl.resource_name == WILDCARD
        return name.startswith(acl.resource_name)

    def matches_entry(self, acl: Acl) -> bool:
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and (self.operation == Operation.ANY or self.operation == acl.operation)
            and (self.permission == Permission.ANY or self.permission == acl.permission)
        )


Bucket = dict[str, list[Acl]]  # the ACLs of one resource pattern, by principal


class _TypeIndex:
    """The ACLs of one resource type: LITERAL ones by name, PREFIXED ones by name with the names sorted; under each
    name, by principal (a decision looks at the request's principal and User:* only)."""

    __slots__ = ("literal", "prefixed", "prefixes", "lengths", "sorted_lengths")

    def __init__(self) -> None:
        self.literal: dict[str, Bucket] = {}
        self.prefixed: dict[str, Bucket] = {}
        self.prefixes: list[str] = []  # sorted keys of `prefixed`
        self.lengths: dict[int, int] = {}  # length of a key of `prefixed` -> how many keys have it
        self.sorted_lengths: tuple[int, ...] = ()  # the keys of `lengths`, ascending

    def add(self, acl: Acl) -> None:
        if acl.pattern_type == PatternType.LITERAL:
            bucket = self.literal.setdefault(acl.resource_name, {})
        else:
            bucket = self.prefixed.get(acl.resource_name)  # type: ignore[assignment]
            if bucket is None:
                bucket = self.prefixed[acl.resource_name] = {}
                insort(self.prefixes, acl.resource_name)
                length = len(acl.resource_name)
                self.lengths[length] = self.lengths.get(length, 0) + 1
                self.sorted_lengths = tuple(sorted(self.lengths))
        bucket.setdefault(acl.principal, []).append(acl)

    def remove(self, acl: Acl) -> None:
        buckets = self.literal if acl.pattern_type == PatternType.LITERAL else self.prefixed
        bucket = buckets[acl.resource_name]
        acls = bucket[acl.principal]
        acls.remove(acl)
        if not acls:
            del bucket[acl.principal]
        if not bucket:
            del buckets[acl.resource_name]
            if buckets is self.prefixed:
                del self.prefixes[bisect_left(self.prefixes, acl.resource_name)]
                length = len(acl.resource_name)
                self.lengths[length] -= 1
                if not self.lengths[length]:
                    del self.lengths[length]
                    self.sorted_lengths = tuple(sorted(self.lengths))

    def applying(self, name: str) -> list[Bucket]:
        """The buckets of ACLs that apply to the resource `name`: its LITERAL ones, the LITERAL "*" ones and the
        PREFIXED ones of every prefix of `name`."""
        found = []
        bucket = self.literal.get(name)
        if bucket:
            found.append(bucket)
        if name != WILDCARD:
            bucket = self.literal.get(WILDCARD)
            if bucket:
                found.append(bucket)
        prefixed = self.prefixed
        if not prefixed:
            return found
        lengths = self.sorted_lengths
        if len(lengths) <= LENGTHS_MAX:  # a slice and a lookup per length the PREFIXED names have
            longest = len(name)
            for length in lengths:
                if length > longest:
                    break
                bucket = prefixed.get(name[:length])
                if bucket is not None:
                    found.append(bucket)
        else:
            for prefix in _prefixes_of(self.prefixes, name):
                found.append(prefixed[prefix])
        return found

    def all(self) -> Iterable[Acl]:
        for buckets in (self.literal, self.prefixed):
            for bucket in buckets.values():
                for acls in bucket.values():
                    yield from acls


def _prefixes_of(names: list[str], name: str) -> Iterable[str]:
    """The members of the sorted list `names` that are prefixes of `name` (longest first). Every prefix of
    `name` sorts at or before it; the greatest candidate left is either a prefix (then the next ones sort before
    it) or shares a shorter common prefix with `name` (then only names up to that common prefix can match)."""
    hi = bisect_right(names, name)
    while hi > 0:
        candidate = names[hi - 1]
        if name.startswith(candidate):
            yield candidate
            hi -= 1
            continue
        common = _common_prefix_length(candidate, name)
        if common == 0:
            return
        hi = bisect_right(names, name[:common], 0, hi - 1)


def _common_prefix_length(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


_CACHE_MAX = 65_536
# With PREFIXED names of at most this many distinct lengths, their prefixes of a name are found by one dict lookup
# per length; with more, by the sorted walk (`_prefixes_of`), whose cost grows with the matches, not the lengths.
LENGTHS_MAX = 16


class Authorizer:
    """The ACLs in force and the decisions made from them (see the module's docstring). Changed only through
    `add`, `remove` and `replace` (the store calls them once a change is durable); answers are plain bools."""

    def __init__(
        self, acls: Iterable[Acl] = (), super_users: Iterable[str] = (), allow_if_no_acl: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[Acl] = set()
        self._index: dict[int, _TypeIndex] = {}
        self._cache: dict[tuple[str, str, int, int, str], bool] = {}
        self.replace(acls)

    # -- the ACLs ----------------------------------------------------------------------------------------------

    def acls(self, flt: AclFilter | None = None) -> list[Acl]:
        """The ACLs `flt` matches (all without one), sorted."""
        return sorted(self._acls if flt is None else (a for a in self._acls if flt.matches(a)))

    def __len__(self) -> int:
        return len(self._acls)

    def __contains__(self, acl: object) -> bool:
        return acl in self._acls

    def add(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            if acl not in self._acls:
                self._acls.add(acl)
                self._index.setdefault(acl.resource_type, _TypeIndex()).add(acl)
        self._cache.clear()

    def remove(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            if acl in self._acls:
                self._acls.discard(acl)
                self._index[acl.resource_type].remove(acl)
        self._cache.clear()

    def replace(self, acls: Iterable[Acl]) -> None:
        """Make the ACLs in force `acls` (a change seen by a cluster node): only the difference is applied."""
        wanted = set(acls)
        self.remove(self._acls - wanted)
        self.add(wanted - self._acls)

    # -- decisions ---------------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """May `principal` connected from `host` do `operation` on the resource? (See the module's docstring.)"""
        key = (principal, host, operation, resource_type, name)
        answer = self._cache.get(key)
        if answer is None:
            answer = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = answer
        return answer

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        applying = index.applying(name) if index is not None else ()
        if not applying:
            return self.allow_if_no_acl
        granting, denying = _GRANTING[operation], _DENYING[operation]
        allowed = False
        for bucket in applying:
            for who in (principal, WILDCARD_PRINCIPAL):
                acls = bucket.get(who)
                if acls is None:
                    continue
                for acl in acls:
                    acl_host = acl.host
                    if acl_host != host and acl_host != "*":
                        continue
                    if acl.permission == _DENY:
                        if acl.operation in denying:
                            return False
                    elif acl.operation in granting:
                        allowed = True
        return allowed

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """The operations the resource type supports that the principal may do on it, as a bit field of
        operation codes (apache/kafka core/src/main/scala/kafka/server/AuthHelper.scala authorizedOperations)."""
        bits = 0
        for op in SUPPORTED[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """May the principal do `operation` on at least one resource of the type: Kafka's default
        Authorizer.authorizeByResourceType (see the module's docstring), including its first test of a
        resource named "hardcode" (which admits super users, and everyone when no ACL applies to that name and
        allow.everyone.if.no.acl.found is set)."""
        if self._decide(principal, host, operation, resource_type, "hardcode"):
            return True
        index = self._index.get(resource_type)
        if index is None:
            return False
        denied: dict[int, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allowed: list[Acl] = []
        wildcard_allowed = False
        for acl in index.all():
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != operation and acl.operation != Operation.ALL:
                continue
            if acl.permission == Permission.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                denied[acl.pattern_type].add(acl.resource_name)
            else:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    wildcard_allowed = True  # answered once every DENY was seen: a "*" DENY wins
                else:
                    allowed.append(acl)
        if wildcard_allowed:
            return True
        for acl in allowed:
            name = acl.resource_name
            if acl.pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            if any(name[:i] in denied[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                continue
            return True
        return False
