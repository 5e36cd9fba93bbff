"""A JSON call to a node's HTTP listener (herd.http.listener), on the standard library: what the fault-injection
client (herd.testing.Faults) and the CLI (`herd faults ...`) both send."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

__all__ = ["NodeHttpError", "call_node"]


class NodeHttpError(Exception):
    """The node refused the call (`status`: its HTTP status) or could not be reached (`status` None); `str(e)` is
    one line: the node's own reason when it gave one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def call_node(url: str, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    """The node's JSON answer to `method path` with `body` as JSON; `url` is "http://HOST:PORT". Raises
    NodeHttpError."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        raise NodeHttpError(_reason(e), e.code) from None
    except (urllib.error.URLError, OSError) as e:
        raise NodeHttpError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from None


def _reason(error: urllib.error.HTTPError) -> str:
    try:
        message = json.loads(error.read())["error"]
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {error.code} {error.reason}"
    return " ".join(str(message).split())
