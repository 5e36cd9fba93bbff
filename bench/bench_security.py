"""What TLS, SASL and ACLs cost: heartbeats/s and produce MB/s over SASL_SSL (SCRAM-SHA-512) with ACLs on, against
PLAINTEXT, in the same run.

    .venv/bin/python bench/bench_security.py [--rounds 3] [--hb-seconds 5] [--messages 200000] [--value-size 1024]

Two brokers run side by side (`herd serve` subprocesses, each on free ports with its own data directory):

- **plain**: one PLAINTEXT listener, no authorizer (herd's default);
- **secure**: a PLAINTEXT listener and a SASL_SSL listener (PEM certificates made with the tests' PKI helper,
  SCRAM-SHA-512 and PLAIN), `authorizer.class.name` set to Kafka's StandardAuthorizer with
  `allow.everyone.if.no.acl.found=false`. The admin (a PLAIN user and super user) creates the SCRAM user `bench`
  and the ACLs it needs: READ on its groups, WRITE, READ and CREATE on its topics (auto-created), as a consumer and a
  producer of a locked-down
  cluster would have; User:ANONYMOUS gets the same, so that the secure broker's PLAINTEXT listener measures the
  ACL checks alone.

Each round measures, in turn on both brokers (ABBA over the rounds):

1. heartbeats (bench_groups.heartbeats: 1,000 members of one stable group on 10 shared connections, closed loop);
   the group forms over PLAINTEXT and the heartbeats go over the listener measured (on SASL_SSL each heartbeat
   connection does the TLS handshake and the SCRAM-SHA-512 exchange first, with herd's own SCRAM client);
2. produce: one confluent-kafka Producer sends --messages values of --value-size bytes (acks=1, linger.ms=5,
   batch.size 1 MB) to a one-partition topic; MB/s of values from the first produce() to flush(), and the broker's
   CPU seconds per GB.

It prints the median of the rounds per configuration and the ratios to plain PLAINTEXT. The machine's other load
moves absolute figures; the ratios within one run are the figures to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' certificate helper

from _broker import BenchBroker as Broker  # noqa: E402
from bench_groups import HeartbeatLoad, _cpu_seconds, heartbeats  # noqa: E402
from certs import make_pki  # noqa: E402

from herd.client.security import ScramClient  # noqa: E402
from herd.client.wire import decode_response, encode_request, request_builder  # noqa: E402

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_PASSWORD, BENCH_PASSWORD = "admin-secret", "bench-secret"
GROUP, TOPIC = "heartbeats", "bench-produce"
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


def secure_overrides(pki: Any) -> dict[str, str]:
    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}";'
    )
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
        "ssl.keystore.location": str(pki.broker_keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.secure.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
    }


def prepare_secure(broker: Broker, pki: Any) -> dict[str, str]:
    """The SCRAM user and the ACLs, made by the admin over SASL_SSL/PLAIN; the bench user's client config."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    bootstrap = f"127.0.0.1:{broker.ports['SECURE']}"
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca_pem),
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": ADMIN_PASSWORD,
        }
    )
    upsert = UserScramCredentialUpsertion(
        "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), BENCH_PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    acls = []
    for principal in ("User:bench", "User:ANONYMOUS"):
        acls += [
            AclBinding(
                ResourceType.GROUP,
                GROUP,
                ResourcePatternType.PREFIXED,
                principal,
                "*",
                AclOperation.READ,
                AclPermissionType.ALLOW,
            )
        ]
        acls += [
            AclBinding(
                ResourceType.TOPIC,
                TOPIC,
                ResourcePatternType.PREFIXED,
                principal,
                "*",
                operation,
                AclPermissionType.ALLOW,
            )
            for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)
        ]
    for future in admin.create_acls(acls).values():
        future.result(30)
    try:
        for future in admin.create_topics([NewTopic(f"{TOPIC}-warm", 1, 1)]).values():
            future.result(30)
    except KafkaException:
        pass
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca_pem),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bench",
        "sasl.password": BENCH_PASSWORD,
    }


def secure_connect(port: int, context: ssl.SSLContext) -> Any:
    """Open a HeartbeatLoad's connection with TLS and the SCRAM-SHA-512 exchange (streams first, then the transport
    is handed to the load's protocol)."""

    async def connect(load: HeartbeatLoad) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
        correlation = 0

        async def call(api_key: int, version: int, **fields: Any) -> Any:
            nonlocal correlation
            correlation += 1
            b = request_builder(api_key, version)
            writer.write(encode_request(b.request(**fields), api_key, version, correlation, "bench"))
            size = int.from_bytes(await reader.readexactly(4), "big")
            return decode_response(await reader.readexactly(size), api_key, version)

        answer = await call(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")
        assert answer.error_code == 0, answer
        scram = ScramClient("SCRAM-SHA-512", "bench", BENCH_PASSWORD)
        token = scram.respond(None)
        while token is not None:
            answer = await call(SASL_AUTHENTICATE, 2, auth_bytes=token)
            assert answer.error_code == 0, answer.error_message
            token = scram.respond(answer.auth_bytes)
        transport = writer.transport
        transport.set_protocol(load)
        load.transport = transport  # type: ignore[assignment]
        load.streams = (reader, writer)  # type: ignore[attr-defined]  # a collected StreamWriter closes its transport

    return connect


def produce(
    bootstrap: str, config: dict[str, str], topic: str, messages: int, value_size: int, broker_pid: int
) -> tuple[float, float]:
    """(MB/s of values, broker CPU seconds per GB)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 2_000_000,
            **config,
        }
    )
    producer.produce(topic, b"warm")
    assert producer.flush(30) == 0
    value = b"v" * value_size
    cpu = _cpu_seconds(broker_pid)
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    cpu = _cpu_seconds(broker_pid) - cpu
    megabytes = messages * value_size / 1e6
    return megabytes / elapsed, cpu / (megabytes / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hb-seconds", type=float, default=5.0)
    parser.add_argument("--hb-members", type=int, default=1000)
    parser.add_argument("--hb-connections", type=int, default=10)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--value-size", type=int, default=1024)
    args = parser.parse_args()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run

    with tempfile.TemporaryDirectory() as tmp:
        pki = make_pki(Path(tmp) / "pki")
        plain = Broker(f"{tmp}/plain", **{"group.initial.rebalance.delay.ms": "0"})
        secure = Broker(f"{tmp}/secure", **secure_overrides(pki))
        try:
            secure_client = prepare_secure(secure, pki)
            context = ssl.create_default_context(cafile=str(pki.ca_pem))
            configs = {
                "PLAINTEXT, no authorizer": (plain, plain.ports["PLAINTEXT"], None, {}),
                "PLAINTEXT, ACLs on": (secure, secure.ports["PLAINTEXT"], None, {}),
                "SASL_SSL SCRAM-SHA-512, ACLs on": (
                    secure,
                    secure.ports["PLAINTEXT"],
                    secure_connect(secure.ports["SECURE"], context),
                    secure_client,
                ),
            }
            results: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
            for round_ in range(args.rounds):
                order = list(configs) if round_ % 2 == 0 else list(reversed(configs))
                for name in order:
                    broker, port, connect, client = configs[name]
                    hb = runner(
                        heartbeats(
                            port,
                            args.hb_members,
                            args.hb_connections,
                            args.hb_seconds,
                            0,
                            broker.proc.pid,
                            broker.memory_mib,
                            connect,
                            group=f"{GROUP}-{round_}-{list(configs).index(name)}",
                        )
                    )  # fresh
                    assert hb["errors"] == 0, (name, hb)
                    listener = "SECURE" if client else "PLAINTEXT"
                    mb_s, cpu_gb = produce(
                        f"127.0.0.1:{broker.ports[listener]}",
                        client,
                        f"{TOPIC}-{round_}-{len(results[name].get('hb', []))}-{listener}",
                        args.messages,
                        args.value_size,
                        broker.proc.pid,
                    )
                    row = results[name]
                    for key, value in (
                        ("hb", hb["per_s"]),
                        ("hb_us", hb["broker_us"]),
                        ("mb_s", mb_s),
                        ("cpu_gb", cpu_gb),
                    ):
                        row.setdefault(key, []).append(value)
                    print(
                        f"round {round_ + 1} {name:<34} {hb['per_s']:>9,.0f} hb/s {hb['broker_us']:5.1f} us/hb "
                        f"{mb_s:7.1f} MB/s {cpu_gb:6.1f} broker CPU s/GB",
                        flush=True,
                    )
        finally:
            plain.stop()
            secure.stop()
    base = {key: statistics.median(values) for key, values in results["PLAINTEXT, no authorizer"].items()}
    print(
        f"\nmedian of {args.rounds} rounds ({args.hb_members} members on {args.hb_connections} connections, "
        f"{args.messages:,} values of {args.value_size} B):"
    )
    print("| configuration | heartbeats/s | broker CPU per heartbeat | produce MB/s | broker CPU s per GB |")
    print("|---|---|---|---|---|")
    for name, row in results.items():
        med = {key: statistics.median(values) for key, values in row.items()}
        print(
            f"| {name} | {med['hb']:,.0f} ({med['hb'] / base['hb']:.2f}) | {med['hb_us']:.1f} us "
            f"({med['hb_us'] / base['hb_us']:.2f}) | {med['mb_s']:.1f} ({med['mb_s'] / base['mb_s']:.2f}) | "
            f"{med['cpu_gb']:.1f} ({med['cpu_gb'] / base['cpu_gb']:.2f}) |"
        )


if __name__ == "__main__":
    main()
