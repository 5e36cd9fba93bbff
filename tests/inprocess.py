"""herd's Server in the test's own process, on an event loop of its own in a thread: for tests that hand it a
store of their own (the in-memory, fault-injecting filesystem) or look at its state while real clients talk to
it over real sockets."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from herd.cluster.topics import TopicStore
from herd.config import BrokerConfig
from herd.server.server import Server


class InProcessBroker:
    """`props` are broker properties (a free port and no initial rebalance delay unless they say otherwise);
    `store` replaces the one `log.dirs` would give; one of them is required (log.dirs' default, ./herd-data, would
    be written into the checkout). `run` runs a coroutine on the broker's loop."""

    def __init__(self, props: dict[str, str], store: TopicStore | None = None, *, timeout: float = 10.0) -> None:
        if store is None and "log.dirs" not in props:
            raise ValueError("InProcessBroker: give log.dirs (a tmp_path) or a store, not the default ./herd-data")
        config = BrokerConfig.from_properties(
            {"listeners": "PLAINTEXT://127.0.0.1:0", "group.initial.rebalance.delay.ms": "0", **props}
        )
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self.server = Server(config, store)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.server.start())
        self.run(self.server.broker.coordinator.wait_loaded())

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def stop(self) -> None:
        self.run(self.server.shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():  # closed, or its self-pipe's sockets leak until a later test's GC finds them
            self.loop.close()
