"""herd.security.acl_store's embedded store on the in-memory filesystem: a change is durable before it is in force
(a crash right after keeps it), a failed write changes nothing, an unreadable acls.json stops the start; the
shared store's failed database write is an AclStoreError as well."""

from __future__ import annotations

import asyncio

import pytest

from herd.cluster.topics import MetadataError
from herd.config import BrokerConfig
from herd.log.fs import MemoryFileSystem
from herd.log.postgres.errors import MetadataWriteError
from herd.security.acl_store import AclStoreError, FileAclStore, SharedAclStore, make_authorizer, open_file_store
from herd.security.acls import Acl, AclFilter, Authorizer, Operation, PatternType, Permission, ResourceType

CONFIG = BrokerConfig.from_properties(
    {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin; User:ops",
        "allow.everyone.if.no.acl.found": "true",
    }
)
A = Acl(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", "*", Operation.READ, Permission.ALLOW)
B = Acl(ResourceType.GROUP, "g", PatternType.PREFIXED, "User:*", "*", Operation.ALL, Permission.DENY)


def fresh() -> MemoryFileSystem:
    fs = MemoryFileSystem()
    fs.makedirs("/data")
    return fs


def test_make_authorizer_reads_the_settings() -> None:
    assert make_authorizer(BrokerConfig.from_properties({})) is None
    authorizer = make_authorizer(CONFIG)
    assert authorizer is not None and authorizer.super_users == {"User:admin", "User:ops"}
    assert authorizer.allow_if_no_acl


def test_changes_are_durable_before_they_are_in_force() -> None:
    fs = fresh()
    store = open_file_store(CONFIG, fs, "/data")
    assert store is not None
    asyncio.run(store.create([A, B]))
    assert store.authorizer.acls() == sorted([A, B])
    survivor = fs.crash()  # a power cut right after the answer
    again = open_file_store(CONFIG, survivor, "/data")
    assert again is not None and again.authorizer.acls() == sorted([A, B])
    filters = [AclFilter(principal="User:alice"), AclFilter(resource_type=ResourceType.TOPIC)]
    deleted = asyncio.run(again.delete(filters))
    assert deleted == [[A], [A]]
    assert open_file_store(CONFIG, survivor.crash(), "/data").authorizer.acls() == [B]  # type: ignore[union-attr]


def test_a_failed_write_changes_nothing() -> None:
    fs = fresh()
    store = FileAclStore(fs, "/data", Authorizer())
    asyncio.run(store.create([A]))
    fs.fail("fsync")
    with pytest.raises(AclStoreError, match="Could not store the ACLs"):
        asyncio.run(store.create([B]))
    assert store.authorizer.acls() == [A]
    fs.fail("rename")
    with pytest.raises(AclStoreError):
        asyncio.run(store.delete([AclFilter()]))
    assert store.authorizer.acls() == [A]
    reopened = FileAclStore(fs, "/data", Authorizer())
    reopened.load()
    assert reopened.authorizer.acls() == [A]


def test_an_unreadable_file_stops_the_start() -> None:
    fs = fresh()
    f = fs.open("/data/acls.json", "w")
    f.append(b'{"version": 1, "acls": [{"resource_type": 2}]}')
    f.close()
    with pytest.raises(MetadataError, match="acls.json cannot be used"):
        open_file_store(CONFIG, fs, "/data")


class FailingCluster:
    """A SharedCluster whose database fails every metadata write (SharedCluster._write raises MetadataWriteError)."""

    acls: frozenset[tuple[int, str, int, str, str, int, int]] = frozenset()
    on_acls = None

    async def change_acls(self, change: object) -> None:
        raise MetadataWriteError("Could not store the ACLs: PostgreSQL at postgresql://herd@db/herd: gone")


def test_a_failed_database_write_is_an_acl_store_error() -> None:
    store = SharedAclStore(FailingCluster(), Authorizer())  # type: ignore[arg-type]
    with pytest.raises(AclStoreError, match="Could not store the ACLs: PostgreSQL"):
        asyncio.run(store.create([A]))
    with pytest.raises(AclStoreError, match="Could not store the ACLs"):
        asyncio.run(store.delete([AclFilter()]))
    assert store.authorizer.acls() == []
