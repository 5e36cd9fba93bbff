"""Where the ACLs live, and the authorizer a broker gets from its configuration.

Embedded, the ACLs are kept in `acls.json` beside topics.json in the first log directory, replaced atomically
(temporary file, fsync, rename, directory fsync: herd.log.fs write_atomically) before the authorizer applies a
change, so an acknowledged CreateAcls/DeleteAcls survives a crash. In cluster mode they are rows of PostgreSQL's
`herd_acls` (schema version 6; the statements are herd.log.postgres.metadata_sql's): a change runs in one transaction
under the metadata lock and NOTIFYs every node; each node's view (herd.cluster.metadata_view) reads the table with
the rest of the metadata and hands it to `SharedAclStore.follow`, which makes the node's authorizer match it. Kafka
keeps ACLs as metadata records (apache/kafka metadata/src/main/java/org/apache/kafka/controller/AclControlManager.java):
the same "durable, then in force on every broker" order.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from herd.cluster.topics import MetadataError
from herd.config import BrokerConfig, parse_super_users
from herd.log.fs import FileSystem, read_whole, write_atomically
from herd.log.postgres import metadata_sql as q
from herd.log.postgres.errors import MetadataWriteError
from herd.security.acls import Acl, AclFilter, Authorizer

if TYPE_CHECKING:
    from herd.cluster.shared import AclRow, SharedCluster

log = logging.getLogger(__name__)

ACLS_FILE = "acls.json"
_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def make_authorizer(config: BrokerConfig) -> Authorizer | None:
    """The authorizer authorizer.class.name asks for (None when it is empty: no ACLs, every client may do
    everything), with super.users and allow.everyone.if.no.acl.found; its ACLs are the store's to load."""
    if not config.get("authorizer.class.name"):
        return None
    return Authorizer(
        super_users=parse_super_users(config.get("super.users")),
        allow_if_no_acl=config.get("allow.everyone.if.no.acl.found"),
    )


class AclStoreError(Exception):
    """The ACLs could not be stored (acls.json could not be written, or the cluster's database failed): nothing
    changed. The message is one line for the log and the client (CreateAcls and DeleteAcls answer it with
    KAFKA_STORAGE_ERROR)."""


class AclStore(Protocol):
    authorizer: Authorizer

    async def create(self, acls: list[Acl]) -> None:
        """Store `acls` (those already there are left as they are), then put them in force. Raises
        AclStoreError when they could not be stored (nothing changed)."""

    async def delete(self, filters: list[AclFilter]) -> list[list[Acl]]:
        """Delete the ACLs each filter matches and answer them, per filter (an ACL two filters match is in both
        answers, as Kafka answers). Raises AclStoreError (nothing changed)."""


def _matching(acls: Iterable[Acl], filters: list[AclFilter]) -> list[list[Acl]]:
    acls = sorted(acls)
    return [[a for a in acls if f.matches(a)] for f in filters]


class FileAclStore:
    """The embedded node's ACLs, in `<directory>/acls.json`."""

    def __init__(self, fs: FileSystem, directory: str, authorizer: Authorizer) -> None:
        self.fs = fs
        self.path = posixpath.join(directory, ACLS_FILE)
        self.authorizer = authorizer

    def load(self) -> None:
        """Put the stored ACLs in force (none when there is no file). Raises MetadataError if the file cannot be
        used: a broker never starts with fewer ACLs than it was given (that could allow what was denied)."""
        try:
            state = json.loads(read_whole(self.fs, self.path))
            acls = [Acl(*(entry[f] for f in _FIELDS)) for entry in state["acls"]]
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise MetadataError(
                f"{self.path} cannot be used ({e}): restore it from a backup (moving it away "
                f"starts the broker with no ACLs)"
            ) from None
        self.authorizer.replace(acls)
        log.info("%d ACLs loaded from %s", len(acls), self.path)

    async def create(self, acls: list[Acl]) -> None:
        new = [a for a in acls if a not in self.authorizer]
        if new:
            self._write(set(self.authorizer.acls()) | set(new))
            self.authorizer.add(new)

    async def delete(self, filters: list[AclFilter]) -> list[list[Acl]]:
        found = _matching(self.authorizer.acls(), filters)
        gone = {a for acls in found for a in acls}
        if gone:
            self._write(set(self.authorizer.acls()) - gone)
            self.authorizer.remove(gone)
        return found

    def _write(self, acls: set[Acl]) -> None:
        state = {"version": 1, "acls": [{f: getattr(a, f) for f in _FIELDS} for a in sorted(acls)]}
        try:
            write_atomically(self.fs, self.path, json.dumps(state, indent=1).encode())
        except OSError as e:
            log.error("could not store the ACLs in %s: %s", self.path, e)
            raise AclStoreError(f"Could not store the ACLs: {e}") from None


class SharedAclStore:
    """A cluster node's ACLs: herd_acls, followed through the cluster's view."""

    def __init__(self, cluster: SharedCluster, authorizer: Authorizer) -> None:
        self.cluster = cluster
        self.authorizer = authorizer
        self.follow(cluster.acls)
        cluster.on_acls = self.follow

    def follow(self, rows: frozenset[AclRow]) -> None:
        """Make the authorizer's ACLs the rows the view read (only the difference is applied)."""
        self.authorizer.replace(Acl(*row) for row in rows)

    async def create(self, acls: list[Acl]) -> None:
        async def insert(conn: Any) -> None:
            async with conn.cursor() as cursor:
                await cursor.executemany(q.INSERT_ACL, [_row(a) for a in acls])

        if acls:
            await self._change(insert)

    async def delete(self, filters: list[AclFilter]) -> list[list[Acl]]:
        async def delete(conn: Any) -> list[list[Acl]]:
            cursor = await conn.execute(q.ACLS)
            found = _matching((Acl(*r) for r in await cursor.fetchall()), filters)
            gone = sorted({a for acls in found for a in acls})
            if gone:
                async with conn.cursor() as cur:
                    await cur.executemany(q.DELETE_ACL, [_row(a) for a in gone])
            return found

        return await self._change(delete)

    async def _change(self, change: Any) -> Any:
        try:
            return await self.cluster.change_acls(change)
        except MetadataWriteError as e:
            raise AclStoreError(str(e)) from None


def _row(acl: Acl) -> tuple[Any, ...]:
    return tuple(getattr(acl, f) for f in _FIELDS)


def open_file_store(config: BrokerConfig, fs: FileSystem, directory: str) -> FileAclStore | None:
    """The embedded node's ACL store with its ACLs loaded, or None without an authorizer. Raises MetadataError."""
    authorizer = make_authorizer(config)
    if authorizer is None:
        return None
    store = FileAclStore(fs, directory, authorizer)
    store.load()
    return store


def open_shared_store(config: BrokerConfig, cluster: SharedCluster) -> SharedAclStore | None:
    """A cluster node's ACL store, following herd_acls from the view `cluster` (started) read, or None."""
    authorizer = make_authorizer(config)
    return None if authorizer is None else SharedAclStore(cluster, authorizer)
