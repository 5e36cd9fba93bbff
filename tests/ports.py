"""Ports for tests, never handed on after being closed (issue 30 item 2): a server binds port 0 and the test
reads the port it got (`server.sockets[0].getsockname()`, a broker's log), and a port that must refuse
connections is held for as long as the test needs it, by `refused_port()`, so that no other worker of the run
can take it in between.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def refused_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on `host` that refuses connections while the block runs: bound by a socket that does not listen
    (Linux answers a connection to it with a reset: ECONNREFUSED), so that nothing else can bind it."""
    with socket.socket() as held:
        held.bind((host, 0))
        yield held.getsockname()[1]
