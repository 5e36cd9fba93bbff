"""The request Protocols of herd.server.apis._requests against kio: every field a Protocol names is a field of
every version of the request its handler serves, so reading it directly (not by getattr) cannot fail."""

from __future__ import annotations

from dataclasses import fields
from typing import get_type_hints

from herd.protocol.messages import request_class
from herd.server.apis import MODULES


def _typed() -> dict[str, tuple[object, type]]:
    """Handler module name -> (module, the Protocol its handle's request is annotated with)."""
    out = {}
    for module in MODULES:
        hint = get_type_hints(module.handle).get("request")
        if getattr(hint, "_is_protocol", False):
            out[module.__name__] = (module, hint)
    return out


def test_every_protocol_field_is_in_every_served_version() -> None:
    typed = _typed()
    assert {"produce", "offset_commit", "join_group", "heartbeat", "sync_group"} <= {
        name.rsplit(".", 1)[1] for name in typed
    }
    for module, protocol in typed.values():
        members = {name for name, value in vars(protocol).items() if isinstance(value, property)}
        assert members, protocol
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):  # type: ignore[attr-defined]
            cls = request_class(module.API_KEY, version)  # type: ignore[attr-defined]
            missing = members - {f.name for f in fields(cls)}
            assert not missing, f"{protocol.__name__}: v{version} has no {sorted(missing)}"
