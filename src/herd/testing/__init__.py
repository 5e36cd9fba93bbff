"""herd's test kit for users: real brokers for tests, fault injection on a running broker, and a pytest plugin
(herd.testing.pytest_plugin, loaded by pytest through the `pytest11` entry point). See docs/testing.md.

    from herd.testing import HerdBroker, Faults
    with HerdBroker() as broker:        # `herd serve` on free ports, data in a temporary directory
        broker.faults.add(action="error", api="Heartbeat", error="REBALANCE_IN_PROGRESS", count=1)

The names are imported on first use, so that `import herd.testing` (which pytest does for the plugin in every
session) costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from herd.testing.admin import HerdAdmin
    from herd.testing.broker import HerdBroker, HerdCluster, HerdStartError
    from herd.testing.faults import FaultError, FaultRule, Faults

__all__ = ["FaultError", "FaultRule", "Faults", "HerdAdmin", "HerdBroker", "HerdCluster", "HerdStartError"]

_HOMES = {
    "FaultError": "faults",
    "FaultRule": "faults",
    "Faults": "faults",
    "HerdAdmin": "admin",
    "HerdBroker": "broker",
    "HerdCluster": "broker",
    "HerdStartError": "broker",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'herd.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"herd.testing.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
