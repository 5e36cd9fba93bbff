"""herd.cluster.nodes.Node.on: a node's address on one listener, from the listeners it registered."""

from __future__ import annotations

from herd.cluster.nodes import Node
from herd.cluster.nodes import listeners as _listeners


def test_a_node_on_each_of_its_listeners() -> None:
    node = Node(
        1,
        "10.0.0.1",
        9092,
        "r1",
        listeners=_listeners({"plaintext": ["10.0.0.1", 9092], "SECURE": ["broker1.example", 9093]}),
    )
    assert node.on("PLAINTEXT") is node
    secure = node.on("SECURE")
    assert secure is not None and (secure.node_id, secure.host, secure.port, secure.rack) == (
        1,
        "broker1.example",
        9093,
        "r1",
    )
    assert node.on("OTHER") is None  # Kafka leaves a broker without the listener out


def test_a_node_without_registered_listeners_serves_every_listener_at_its_address() -> None:
    for stored in (None, "garbage", {"SECURE": "x"}):
        node = Node(2, "h", 1, listeners=_listeners(stored))
        assert node.on("SECURE") is node and node.on("PLAINTEXT") is node
