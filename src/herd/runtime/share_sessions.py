"""Share sessions (KIP-932): what a share consumer fetches from this node, keyed by (group id, member id) and bound to
the connection that opened it (Kafka 4.2's ShareSessionCache, ShareSession and SharePartitionManager.newContext and
acknowledgeSessionUpdate; docs/kip-932/share-fetch-rules.md section 2).

ShareFetch:
- epoch 0 opens a session with the request's partitions, replacing the member's session if it had one (nothing is
  given back: its records stay acquired until acknowledged or their lock runs out); the next request carries
  epoch 1. SHARE_SESSION_LIMIT_REACHED when group.share.max.share.sessions are open (there is no eviction).
- epoch -1 closes the member's session (SHARE_SESSION_NOT_FOUND without one; the epoch is not compared); the
  caller fetches nothing, applies the acknowledgements, then gives back the member's records of the session's
  partitions.
- any other epoch must be the session's (INVALID_SHARE_SESSION_EPOCH, or SHARE_SESSION_NOT_FOUND): every partition
  the request names joins the session (flagged to be answered), the forgotten ones leave it, and the epoch moves on
  (wrapping past INT32_MAX to 1). The fetch covers every partition of the session.
ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH; -1 closes as above; any other epoch must be the
session's and moves it on; the partitions do not change.
A connection tracks the last session it opened; when it closes, that session (if it is still the one it opened)
closes and its records are given back.

Pure: no I/O. The caller gives back the records of the sessions this returns as closed.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from herd.coordinator.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicPartition = tuple[uuid.UUID, int]  # (topic id, partition): share requests name topics by id


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    connection: object
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[TopicPartition, bool] = field(default_factory=dict)
    """Each partition, in the order it was added, and whether the next answer must name it (it was added since,
    or its last answer was an error: CachedSharePartition.requiresUpdateInResponse)."""

    def next_epoch(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[object, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, connection: object, partitions: list[TopicPartition]) -> ShareSession:
        """A ShareFetch at epoch 0: a new session (replacing the member's), next epoch 1."""
        key = (group_id, member_id)
        replaced = self._sessions.pop(key, None)
        if replaced is None and len(self._sessions) >= self.max_sessions:
            raise ShareSessionError(
                ErrorCode.share_session_limit_reached,
                f"The share session cache is full ({self.max_sessions} sessions: group.share.max.share.sessions).",
            )
        session = ShareSession(group_id, member_id, connection, partitions=dict.fromkeys(partitions, False))
        self._sessions[key] = session
        self._by_connection[connection] = session
        return session

    def fetch(
        self, group_id: str, member_id: str, epoch: int, added: list[TopicPartition], forgotten: list[TopicPartition]
    ) -> ShareSession:
        """A ShareFetch at a positive epoch: the session, with `added` in it (flagged when new), `forgotten` out of
        it, and its epoch moved on."""
        session = self._current(group_id, member_id, epoch)
        for tp in added:
            if tp not in session.partitions:
                session.partitions[tp] = True
        for tp in forgotten:
            session.partitions.pop(tp, None)
        session.next_epoch()
        return session

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A ShareAcknowledge at a positive epoch: the session, its epoch moved on."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch, "A ShareAcknowledge cannot open a share session (epoch 0)."
            )
        session = self._current(group_id, member_id, epoch)
        session.next_epoch()
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession:
        """A request at the final epoch: the member's session, removed (its epoch is not compared)."""
        session = self._sessions.pop((group_id, member_id), None)
        if session is None:
            raise _not_found(group_id, member_id)
        return session

    def connection_closed(self, connection: object) -> ShareSession | None:
        """The session the connection last opened, closed now if it is still open (its records are to be given
        back); None if it was closed or replaced since."""
        session = self._by_connection.pop(connection, None)
        if session is None or self._sessions.get((session.group_id, session.member_id)) is not session:
            return None
        del self._sessions[(session.group_id, session.member_id)]
        return session

    def _current(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise _not_found(group_id, member_id)
        if epoch != session.epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                f"The share session epoch {epoch} does not match the expected epoch {session.epoch}.",
            )
        return session


def _not_found(group_id: str, member_id: str) -> ShareSessionError:
    return ShareSessionError(
        ErrorCode.share_session_not_found, f"Share session for member {member_id} of group {group_id} not found."
    )
