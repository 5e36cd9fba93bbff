"""The Python client of a node's fault injection API (herd.server.http), synchronous, on the standard library.

    faults = Faults("http://127.0.0.1:PORT")        # the node's herd.http.listener (started with faults enabled)
    rule = faults.add(action="error", api="Heartbeat", group="g", error="REBALANCE_IN_PROGRESS", count=1)
    with faults.injected(action="delay", api="OffsetCommit", delay_ms=500): ...   # removed on exit
    faults.list(); faults.remove(rule.id); faults.clear(); faults.drop_connections(client_id="c")
    faults.move_coordinator("g"); faults.move_leader("t", 0)

Every failure raises `FaultError` with the server's one-line reason (a refused rule, faults disabled on the
node, no such rule) or why the node could not be reached. docs/faults.md describes each action and error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from herd.client.node_http import NodeHttpError, call_node

__all__ = ["FaultError", "FaultRule", "Faults"]


class FaultError(NodeHttpError):
    """The node refused the call (`status`: its HTTP status) or could not be reached (`status` None); `str(e)` is
    one line."""


@dataclass(frozen=True, slots=True)
class FaultRule:
    """A rule as the node holds it: its id, its fields (None when not set) and how often it applied (`hits`)."""

    id: int
    action: str
    api: str | None = None
    group: str | None = None
    topic: str | None = None
    member: str | None = None
    client_id: str | None = None
    error: str | None = None
    delay_ms: int | None = None
    when: str | None = None
    count: int | None = None
    probability: float = 1.0
    seed: int | None = None
    hits: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultRule:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class Faults:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        """`url`: the node's HTTP listener, "http://HOST:PORT" (or "HOST:PORT")."""
        self.url = (url if "://" in url else f"http://{url}").rstrip("/")
        self.timeout = timeout

    def add(self, **rule: Any) -> FaultRule:
        """Add a rule (keywords as in docs/faults.md: action, api, group, topic, member, client_id, error,
        delay_ms, when, count, probability, seed); raises FaultError when the node refuses it."""
        return FaultRule.from_json(self._call("POST", "/v1/faults", rule))

    def list(self) -> list[FaultRule]:
        return [FaultRule.from_json(r) for r in self._call("GET", "/v1/faults")["faults"]]

    def remove(self, rule_id: int) -> None:
        """Raises FaultError when there is no such rule (an expired count removes it)."""
        self._call("DELETE", f"/v1/faults/{int(rule_id)}")

    def clear(self) -> int:
        """Remove every rule; how many there were."""
        return int(self._call("DELETE", "/v1/faults")["removed"])

    @contextmanager
    def injected(self, **rule: Any) -> Iterator[FaultRule]:
        """The rule, in force inside the `with` block and removed on exit (unless its count already did)."""
        added = self.add(**rule)
        try:
            yield added
        finally:
            try:
                self.remove(added.id)
            except FaultError as e:
                if e.status != 404:  # 404: its count removed it already
                    raise

    def drop_connections(self, client_id: str | None = None, host: str | None = None) -> int:
        """Abort the node's open connections from this client id and/or host (all without filters)."""
        body = {k: v for k, v in (("client_id", client_id), ("host", host)) if v is not None}
        return int(self._call("POST", "/v1/connections/drop", body)["dropped"])

    def move_coordinator(self, group: str, to: int | None = None, unavailable_ms: int = 0) -> dict[str, Any]:
        """Move `group`'s coordinator (embedded mode: unload and reload its partition)."""
        body: dict[str, Any] = {"group": group, "unavailable_ms": unavailable_ms}
        if to is not None:
            body["to"] = to
        return dict(self._call("POST", "/v1/moves", body))

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> dict[str, Any]:
        """Move a partition's leadership to node `to` (or the next live one); cluster mode only."""
        body: dict[str, Any] = {"topic": topic, "partition": partition}
        if to is not None:
            body["to"] = to
        return dict(self._call("POST", "/v1/moves", body))

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return call_node(self.url, method, path, body, self.timeout)
        except NodeHttpError as e:
            raise FaultError(str(e), e.status) from None
