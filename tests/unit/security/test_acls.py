"""herd.security.acls: Kafka's StandardAuthorizer decisions, by example and against a brute-force reference that
reads the rules off apache/kafka metadata/src/main/java/org/apache/kafka/metadata/authorizer/
StandardAuthorizerData.java literally (every ACL tested against the resource, no index)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from herd.security.acls import (
    CLUSTER_NAME,
    SUPPORTED,
    Acl,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    _prefixes_of,
)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
ALICE, BOB = "User:alice", "User:bob"


def acl(
    name: str,
    op: int = Op.READ,
    perm: int = ALLOW,
    principal: str = ALICE,
    host: str = "*",
    rtype: int = T,
    pattern: int = LIT,
) -> Acl:
    return Acl(rtype, name, pattern, principal, host, op, perm)


def test_no_acl_for_the_resource_is_decided_by_allow_everyone_if_no_acl_found() -> None:
    assert not Authorizer().authorize(ALICE, "1.2.3.4", Op.READ, T, "t")
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, "1.2.3.4", Op.READ, T, "t")
    # an ACL on the resource for someone else: the resource has ACLs, so allow.everyone does not apply
    a = Authorizer([acl("t", principal=BOB)], allow_if_no_acl=True)
    assert not a.authorize(ALICE, "h", Op.READ, T, "t")
    assert a.authorize(ALICE, "h", Op.READ, T, "other")


def test_deny_wins_and_super_users_bypass() -> None:
    a = Authorizer([acl("t"), acl("t", perm=DENY, principal="User:*")], super_users=["User:admin"])
    assert not a.authorize(ALICE, "h", Op.READ, T, "t")
    assert a.authorize("User:admin", "h", Op.READ, T, "t")


def test_implications_apply_to_allow_only() -> None:
    a = Authorizer([acl("t", Op.WRITE), acl("t", Op.ALTER_CONFIGS)])
    assert a.authorize(ALICE, "h", Op.DESCRIBE, T, "t")
    assert a.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, T, "t")
    assert not a.authorize(ALICE, "h", Op.READ, T, "t")
    b = Authorizer([acl("t", Op.ALL), acl("t", Op.WRITE, DENY)])
    assert b.authorize(ALICE, "h", Op.DESCRIBE, T, "t")  # a DENY of WRITE does not deny DESCRIBE
    assert not b.authorize(ALICE, "h", Op.WRITE, T, "t")


def test_patterns_hosts_and_wildcards() -> None:
    a = Authorizer([acl("pay", pattern=PRE), acl("*", Op.DESCRIBE, principal="User:*", host="10.0.0.1")])
    assert a.authorize(ALICE, "h", Op.READ, T, "payments")
    assert a.authorize(ALICE, "h", Op.READ, T, "pay")
    assert not a.authorize(ALICE, "h", Op.READ, T, "pa")
    assert a.authorize(BOB, "10.0.0.1", Op.DESCRIBE, T, "anything")
    assert not a.authorize(BOB, "10.0.0.2", Op.DESCRIBE, T, "anything")
    assert not a.authorize(ALICE, "h", Op.READ, G, "payments")  # other resource type


def test_authorized_operations_bits() -> None:
    a = Authorizer([acl("t", Op.WRITE)])
    assert a.authorized_operations(ALICE, "h", T, "t") == (1 << Op.WRITE) | (1 << Op.DESCRIBE)
    assert Authorizer(super_users=[ALICE]).authorized_operations(ALICE, "h", C, CLUSTER_NAME) == sum(
        1 << op for op in SUPPORTED[C]
    )


def test_problems_of_new_acls() -> None:
    assert acl("t").problem() is None
    assert "empty" in acl("").problem()
    assert acl("*", pattern=PRE).problem()
    assert acl("x", rtype=C).problem()
    assert acl(CLUSTER_NAME, rtype=C, op=Op.ALTER).problem() is None
    assert acl("t", principal="alice").problem()
    assert acl("t", op=Op.ANY).problem()
    assert acl("t", op=99).problem() == "Invalid operation 99"
    assert acl("t", rtype=42).problem()
    assert acl("t", perm=9).problem()
    assert acl("t", pattern=PatternType.MATCH).problem()
    assert acl("t", perm=Permission.ANY).problem()
    assert acl("t", rtype=ResourceType.ANY).problem()
    assert AclFilter(pattern_type=PatternType.UNKNOWN).problem()
    assert AclFilter(operation=99).problem()
    assert AclFilter().problem() is None


def test_filters() -> None:
    acls = [acl("t"), acl("*"), acl("te", pattern=PRE), acl("x", pattern=PRE, principal=BOB, op=Op.WRITE)]
    a = Authorizer(acls)
    assert a.acls(AclFilter(T, "test", PatternType.MATCH)) == sorted([acl("*"), acl("te", pattern=PRE)])
    assert a.acls(AclFilter(T, "t", PatternType.MATCH)) == sorted([acl("t"), acl("*")])
    assert a.acls(AclFilter(T, "te", PatternType.ANY)) == [acl("te", pattern=PRE)]
    assert a.acls(AclFilter(T, "te", LIT)) == []
    assert a.acls(AclFilter(principal=BOB)) == [acls[3]]
    assert a.acls(AclFilter(operation=Op.WRITE, permission=ALLOW)) == [acls[3]]
    assert len(a.acls(AclFilter())) == 4


def test_authorize_by_resource_type() -> None:
    assert Authorizer([acl("t", Op.WRITE)]).authorize_by_resource_type(ALICE, "h", Op.WRITE, T)
    assert not Authorizer([acl("t", Op.WRITE), acl("t", Op.WRITE, DENY)]).authorize_by_resource_type(
        ALICE, "h", Op.WRITE, T
    )
    assert not Authorizer([acl("tx", Op.WRITE), acl("t", Op.WRITE, DENY, pattern=PRE)]).authorize_by_resource_type(
        ALICE, "h", Op.WRITE, T
    )
    assert not Authorizer([acl("*", Op.WRITE), acl("*", Op.WRITE, DENY)]).authorize_by_resource_type(
        ALICE, "h", Op.WRITE, T
    )
    assert Authorizer(super_users=[ALICE]).authorize_by_resource_type(ALICE, "h", Op.WRITE, T)
    assert not Authorizer().authorize_by_resource_type(ALICE, "h", Op.WRITE, T)


# -- against a brute-force reference -----------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "ab", "abc", "abd", "b", "ba", "*", "abcd", "x"])
PRINCIPALS = st.sampled_from([ALICE, BOB, "User:*"])
HOSTS = st.sampled_from(["*", "h1", "h2"])
OPS = st.sampled_from([op for op in Operation if op not in (Op.ANY, Op.UNKNOWN)])
ACLS = st.builds(
    Acl,
    st.sampled_from([T, G]),
    NAMES,
    st.sampled_from([LIT, PRE]),
    PRINCIPALS,
    HOSTS,
    OPS,
    st.sampled_from([ALLOW, DENY]),
)

IMPLIES = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}


def reference(
    acls: list[Acl], supers: set[str], allow_if_none: bool, principal: str, host: str, op: int, rtype: int, name: str
) -> bool:
    if principal in supers:
        return True
    applying = [
        a
        for a in acls
        if a.resource_type == rtype
        and (
            (a.pattern_type == LIT and a.resource_name in (name, "*"))
            or (a.pattern_type == PRE and name.startswith(a.resource_name))
        )
    ]
    if not applying:
        return allow_if_none
    mine = [a for a in applying if a.principal in (principal, "User:*") and a.host in (host, "*")]
    if any(a.permission == DENY and a.operation in (op, Op.ALL) for a in mine):
        return False
    return any(
        a.permission == ALLOW and (a.operation in (op, Op.ALL) or a.operation in IMPLIES.get(op, ())) for a in mine
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(ACLS, max_size=25),
    st.booleans(),
    PRINCIPALS.filter(lambda p: p != "User:*"),
    st.sampled_from(["h1", "h2"]),
    OPS,
    st.sampled_from([T, G]),
    NAMES.filter(lambda n: n != "*"),
    st.lists(ACLS, max_size=5),
)
def test_decisions_match_the_reference(
    acls: list[Acl], allow_if_none: bool, principal: str, host: str, op: int, rtype: int, name: str, removed: list[Acl]
) -> None:
    supers = {BOB} if len(acls) % 3 == 0 else set()
    a = Authorizer(acls + removed, super_users=supers, allow_if_no_acl=allow_if_none)
    a.remove([r for r in removed if r not in acls])  # the index after removals equals one built without them
    expected = reference(acls, supers, allow_if_none, principal, host, op, rtype, name)
    assert a.authorize(principal, host, op, rtype, name) == expected
    assert a.authorize(principal, host, op, rtype, name) == expected  # cached
    bits = a.authorized_operations(principal, host, rtype, name)
    assert bits == sum(
        1 << o for o in SUPPORTED[rtype] if reference(acls, supers, allow_if_none, principal, host, o, rtype, name)
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text("abc", max_size=4), max_size=20), st.text("abc", max_size=6))
def test_prefix_walk_finds_every_prefix(names: list[str], name: str) -> None:
    names = sorted(set(n for n in names if n))
    assert sorted(_prefixes_of(names, name)) == sorted(n for n in names if name.startswith(n))


FILTERS = st.builds(
    AclFilter,
    st.sampled_from([ResourceType.ANY, T, G]),
    st.one_of(st.none(), NAMES),
    st.sampled_from([PatternType.ANY, PatternType.MATCH, LIT, PRE]),
    st.one_of(st.none(), PRINCIPALS),
    st.one_of(st.none(), HOSTS),
    st.one_of(st.just(Op.ANY), OPS),
    st.sampled_from([Permission.ANY, ALLOW, DENY]),
)


def filter_reference(f: AclFilter, a: Acl) -> bool:
    if f.resource_type not in (ResourceType.ANY, a.resource_type):
        return False
    if f.pattern_type in (LIT, PRE) and f.pattern_type != a.pattern_type:
        return False
    if f.resource_name is not None:
        if f.pattern_type == PatternType.MATCH:
            ok = (
                a.resource_name in (f.resource_name, "*")
                if a.pattern_type == LIT
                else f.resource_name.startswith(a.resource_name)
            )
        else:
            ok = f.resource_name == a.resource_name
        if not ok:
            return False
    return (
        f.principal in (None, a.principal)
        and f.host in (None, a.host)
        and f.operation in (Op.ANY, a.operation)
        and f.permission in (Permission.ANY, a.permission)
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(ACLS, max_size=20), FILTERS)
def test_filters_match_the_reference(acls: list[Acl], f: AclFilter) -> None:
    assert Authorizer(acls).acls(f) == sorted(set(a for a in acls if filter_reference(f, a)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(ACLS, max_size=25),
    PRINCIPALS.filter(lambda p: p != "User:*"),
    OPS,
    st.sampled_from([T, G]),
    NAMES.filter(lambda n: n != "*"),
)
def test_the_sorted_walk_and_the_length_lookups_agree(
    acls: list[Acl], principal: str, op: int, rtype: int, name: str
) -> None:
    import herd.security.acls as module

    by_lengths = Authorizer(acls).authorize(principal, "h1", op, rtype, name)
    saved, module.LENGTHS_MAX = module.LENGTHS_MAX, 0
    try:
        assert Authorizer(acls).authorize(principal, "h1", op, rtype, name) == by_lengths
    finally:
        module.LENGTHS_MAX = saved


def by_resource_type_reference(acls: list[Acl], principal: str, host: str, op: int, rtype: int) -> bool:
    """Kafka's default Authorizer.authorizeByResourceType, read literally (without its "hardcode" first test)."""
    mine = [
        a
        for a in acls
        if a.resource_type == rtype
        and a.host in (host, "*")
        and a.principal in (principal, "User:*")
        and a.operation in (op, Op.ALL)
    ]
    if any(a.permission == DENY and a.pattern_type == LIT and a.resource_name == "*" for a in mine):
        return False
    if any(a.permission == ALLOW and a.pattern_type == LIT and a.resource_name == "*" for a in mine):
        return True
    deny_lit = {a.resource_name for a in mine if a.permission == DENY and a.pattern_type == LIT}
    deny_pre = {a.resource_name for a in mine if a.permission == DENY and a.pattern_type == PRE}
    for a in mine:
        if a.permission != ALLOW:
            continue
        if a.pattern_type == LIT and a.resource_name in deny_lit:
            continue
        if any(a.resource_name[:i] in deny_pre for i in range(1, len(a.resource_name) + 1)):
            continue
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.lists(ACLS, max_size=20), PRINCIPALS.filter(lambda p: p != "User:*"), OPS, st.sampled_from([T, G]))
def test_authorize_by_resource_type_matches_kafkas_algorithm(
    acls: list[Acl], principal: str, op: int, rtype: int
) -> None:
    a = Authorizer(acls)
    expected = a._decide(principal, "h1", op, rtype, "hardcode") or by_resource_type_reference(
        acls, principal, "h1", op, rtype
    )
    assert a.authorize_by_resource_type(principal, "h1", op, rtype) == expected
