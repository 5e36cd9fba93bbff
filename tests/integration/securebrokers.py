"""Brokers with secure listeners for the security tests (test_client_security, test_cli_security).

`start_secure_broker(root, extra)` starts `herd serve` with four listeners on port 0: PLAINTEXT, SASL_PLAINTEXT
(PLAIN for user carol from the listener's JAAS config; SCRAM from the broker's credential store), SSL requiring a
client certificate, and SASL_SSL, with the certificates of tests/certs.py ("{client}" in a value of `extra` stands
for the client certificate's principal name)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from brokers import BrokerProcess

ADMIN_PASSWORD = "admin-secret-0"
ALICE_PASSWORD = "alice-secret-1"
CAROL_PASSWORD = "carol-secret-2"
_LISTENER = re.compile(r"herd listener (\w+) \((\w+)\) on [^:\s]+:(\d+)")


def listener_ports(broker: BrokerProcess, count: int, timeout: float = 10.0) -> dict[str, int]:
    """Listener name -> port, from the broker's log."""
    # not a wait_until: what was found by the bound is returned, and a test fails only on a listener it uses
    deadline = time.monotonic() + timeout
    while True:
        found = {name: int(port) for name, _, port in _LISTENER.findall(broker.log())}
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


class SecureBroker:
    def __init__(self, broker: BrokerProcess, ports: dict[str, int], pki: Any) -> None:
        self.broker, self.ports, self.pki = broker, ports, pki

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def scram(
        self, user: str, password: str, mechanism: str = "SCRAM-SHA-512", protocol: str = "SASL_PLAINTEXT"
    ) -> dict[str, str]:
        props = {
            "security.protocol": protocol,
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f"org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";',
        }
        if protocol == "SASL_SSL":
            props["ssl.truststore.location"] = str(self.pki.ca_pem)
        return props

    def mtls(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(self.pki.ca_pem),
            "ssl.keystore.location": str(self.pki.client_keystore()),
        }


def start_secure_broker(root: Path, extra: dict[str, str] | None = None) -> SecureBroker:
    from certs import make_pki

    pki = make_pki(root / "pki")
    config = root / "server.properties"
    config.write_text(
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required user_carol="{CAROL_PASSWORD}";\n'
    )
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.ssl.ssl.client.auth": "required",
        "offsets.topic.num.partitions": "3",
        **{k: v.replace("{client}", pki.client_subject) for k, v in (extra or {}).items()},
    }
    broker = BrokerProcess(root / "data", overrides, config=config).start()
    return SecureBroker(broker, listener_ports(broker, 4), pki)
