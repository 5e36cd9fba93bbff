"""The API handlers and the server never ask which backend they run on: the metadata and admin side is one async
interface (herd.cluster.api.ClusterAdmin), a read a log cannot answer from memory says so (NotInMemoryError), and
both kinds of node are built by herd.server.node.start_node. A handler that tested `cluster.shared` again would
bring back the two paths this removed."""

from __future__ import annotations

import re
from pathlib import Path

import herd.server.apis
import herd.server.server

APIS = Path(herd.server.apis.__file__).parent
# `broker.cluster.shared`, `getattr(x, "shared", ...)`, `settled(...)`; not the module herd.cluster.shared
ASKS = re.compile(r"(?<!herd\.cluster)\.shared\b|getattr\([^)]*[\"']shared[\"']|\bsettled\(")


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of `path` with their comments cut off (docstrings may name the attribute)."""
    return [(n, line.split("#", 1)[0]) for n, line in enumerate(path.read_text().splitlines(), 1)]


def test_no_api_handler_asks_whether_the_cluster_is_shared() -> None:
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(APIS.glob("*.py"))
        for n, line in _code_lines(path)
        if ASKS.search(line)
    ]
    assert not found, "handlers ask which backend they run on:\n" + "\n".join(found)


def test_the_server_does_not_ask_either() -> None:
    path = Path(herd.server.server.__file__)
    found = [f"{path.name}:{n}: {line.strip()}" for n, line in _code_lines(path) if ASKS.search(line)]
    assert not found, "Server asks which backend it runs on:\n" + "\n".join(found)
