"""The API handlers and the server never ask which backend they run on: the metadata and admin side is one async
interface (herd.cluster.api.ClusterAdmin), a read a log cannot answer from memory says so (NotInMemoryError), and
both kinds of node are built by herd.server.node.start_node. A handler that tested `cluster.shared` again would
bring back the two paths this removed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import herd.runtime
import herd.server
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


# -- the whole shell and the runtime ------------------------------------------------------------------------------
SERVER = Path(herd.server.__file__).parent
RUNTIME = Path(herd.runtime.__file__).parent
MODE_ATTRIBUTES = {"shared", "remote"}  # `cluster.shared`; `remote`, the flag partition logs had, kept out for good
# The mode tests kept, each with its reason in a comment beside it: (module, function) -> how many it makes.
KEPT = {
    ("server/broker.py", "Broker.nodes"): 1,  # only a cluster knows other nodes
    ("server/broker.py", "Broker.node"): 1,
    ("server/moves.py", "move"): 1,  # two operations: a cluster's leadership move, one node's unload and reload
    ("server/views.py", "coordinator_node"): 1,  # one node: what its runtime hosts; a cluster: the leader read
    ("server/http.py", "get_group"): 1,  # only a cluster has another node to proxy the group to
}


def _mode_tests(path: Path, root: Path) -> list[tuple[str, str, int]]:
    """(module, enclosing function, line) of every place `path` asks which mode it runs in: reads `.shared` or
    `.remote` (not the module herd.cluster.shared), `getattr(x, "shared" | "remote")`, or calls `settled(...)`."""
    found: list[tuple[str, str, int]] = []
    module = f"{root.name}/{path.relative_to(root).as_posix()}"

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = f"{scope}.{child.name}" if scope else child.name
            if isinstance(child, ast.Attribute) and child.attr in MODE_ATTRIBUTES:
                if ast.unparse(child.value) != "herd.cluster":
                    found.append((module, scope, child.lineno))
            elif isinstance(child, ast.Call):
                name = ast.unparse(child.func)
                named = [a.value for a in child.args[1:2] if isinstance(a, ast.Constant)]
                if name == "settled" or (name == "getattr" and set(named) & MODE_ATTRIBUTES):
                    found.append((module, scope, child.lineno))
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return found


def test_the_shell_and_the_runtime_ask_the_mode_only_where_it_is_kept_with_its_reason() -> None:
    """Every module of herd.server (handlers included) and herd.runtime: a mode test outside KEPT fails, so does
    one more inside it (ask the log or the cluster for the capability instead: herd.log.api.PartitionLog's
    `resume`, `epoch_history`, `load_transactions`, `commits_itself`, an AppendResult's `durable_end`,
    NotInMemoryError; the cluster's `places_partitions`, `stored_end_offsets`)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for root in (SERVER, RUNTIME):
        for path in sorted(root.rglob("*.py")):
            for module, scope, line in _mode_tests(path, root):
                counts.setdefault((module, scope), []).append(line)
    unexpected = {
        f"{module}:{lines} in {scope or 'the module'}"
        for (module, scope), lines in counts.items()
        if len(lines) > KEPT.get((module, scope), 0)
    }
    assert not unexpected, "asks which mode it runs in:\n" + "\n".join(sorted(unexpected))
    assert set(counts) == set(KEPT), f"kept, but no longer there (drop it from KEPT): {set(KEPT) - set(counts)}"
