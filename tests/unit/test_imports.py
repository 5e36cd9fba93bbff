"""herd's import graph: the layer contracts of pyproject.toml hold, no module imports one that imports it, and
`herd serve` does not load the client library.

The graph is grimp's (the engine of import-linter, a dev dependency): every import statement of src/herd counts,
those inside functions and under `if TYPE_CHECKING:` too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def test_the_layer_contracts_hold() -> None:
    """What `lint-imports` checks, with the contracts in pyproject.toml's [tool.importlinter]."""
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
         "sys.exit(lint_imports_command())", "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    report = run.stdout[run.stdout.find("Contracts") :] + run.stderr
    assert run.returncode == 0, f"import contracts broken (run `lint-imports` to see this again):\n{report}"


def _cycles(graph: grimp.ImportGraph) -> set[tuple[str, ...]]:
    """Each cycle as the modules along it, starting from its smallest name: an import A -> B is on a cycle when
    B leads back to A."""
    found = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycle = back[-1:] + back[:-1]  # importer, imported, ..., the module before importer
                first = cycle.index(min(cycle))
                found.add(cycle[first:] + cycle[:first])
    return found


def _describe(graph: grimp.ImportGraph, cycle: tuple[str, ...]) -> str:
    lines = [" -> ".join((*cycle, cycle[0]))]
    for importer, imported in zip(cycle, (*cycle[1:], cycle[0])):
        at = ", ".join(str(d["line_number"]) for d in graph.get_import_details(importer=importer, imported=imported))
        lines.append(f"    {importer} imports {imported} (line {at})")
    return "\n".join(lines)


def test_no_module_imports_a_module_that_imports_it() -> None:
    """Module by module: the acyclic_siblings contract does not look between a package and its own modules."""
    graph = grimp.build_graph("herd", cache_dir=None)
    cycles = sorted(_cycles(graph))
    assert not cycles, "import cycles among herd's modules:\n" + "\n".join(_describe(graph, c) for c in cycles)


def test_serve_does_not_load_the_client_library() -> None:
    """The admin commands are imported by name when used; the broker never imports herd.client."""
    code = (
        "import sys, herd.cli, herd.server.server; "
        "print(sorted(m for m in sys.modules if m.startswith(('herd.client', 'herd.cli.'))))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_coordinator_core_is_pure() -> None:
    """docs/architecture.md: the coordinator imports no other part of herd, and nothing that does I/O or reads
    the clock (it is driven by the runtime and tested synchronously with a manual clock)."""
    graph = grimp.build_graph("herd", include_external_packages=True, cache_dir=None)
    core = {m for m in graph.modules if m == "herd.coordinator" or m.startswith("herd.coordinator.")}
    outside = {imported for importer in core for imported in graph.find_modules_directly_imported_by(importer)} - core
    impure = {"asyncio", "socket", "os", "time", "threading", "selectors", "subprocess", "concurrent"}
    assert not {m for m in outside if m.startswith("herd.")}, sorted(outside)
    assert not {m for m in outside if m.split(".")[0] in impure}, sorted(outside)
