"""What a storm of failed SCRAM logins costs a well-behaved client of the same broker.

    PYTHONPATH=<a checkout's src> .venv/bin/python bench/bench_failed_logins.py [--logins 1000] [--processes 4]
                                                                                [--threads 8] [--round-trips 300]

A `herd serve` with one SASL_PLAINTEXT listener (bench/_broker.py) gets a SCRAM-SHA-512 user through
AlterUserScramCredentials (confluent-kafka's AdminClient, authenticated with PLAIN as the JAAS admin). The good
client is a confluent-kafka producer authenticated with SCRAM-SHA-512 that produces one message and waits for
its acknowledgement (acks=all), --round-trips times; the median and p99 of those round trips are taken once on
a quiet broker and once while --processes processes of --threads threads each run --logins failed SCRAM-SHA-512
logins between them (half with a wrong password for the real user, half for users that do not exist; each a
new connection: SaslHandshake, the client's first message, then a final message whose proof is wrong, computed
from the password as a client does, 4096 iterations of PBKDF2; with --random-proofs random bytes instead, so
that the attackers take little CPU of their own and what remains is the broker's work). The broker answers
each failure after Kafka's connection.failed.authentication.delay.ms (100 ms) and closes the connection.
Printed: both medians and p99s, the ratio of the medians, and how long the storm took.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import io
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time

from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

sys.path.insert(0, os.path.dirname(__file__))
from _broker import BenchBroker  # noqa: E402

from herd.protocol.messages import request_class, response_class  # noqa: E402
from herd.protocol.values import make  # noqa: E402

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" '
    'user_admin="admin-pw";'
)
USER, PASSWORD = "good", "good-password"


class Raw:
    """A blocking connection speaking exact requests (kio), for the attackers."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation = 0

    def request(self, api_key: int, version: int, **fields: object) -> object:
        cls = request_class(api_key, version)
        header_cls = cls.__header_schema__
        self.correlation += 1
        buf = io.BytesIO()
        entity_writer(header_cls)(
            buf,
            header_cls(
                request_api_key=i16(api_key),
                request_api_version=i16(version),
                correlation_id=i32(self.correlation),
                client_id="storm",
            ),
        )
        entity_writer(cls)(buf, make(cls, fields))
        body = buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", self._exact(4))[0]
        frame = self._exact(size)
        response_cls = response_class(api_key, version)
        _, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        return entity_reader(response_cls)(frame, offset)[0]

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data


def failed_login(port: int, user: str, random_proof: bool = False) -> bool:
    """One SCRAM-SHA-512 login with a wrong password; True when the broker refused it as Kafka does.
    `random_proof`: random bytes for the proof instead of deriving it (no PBKDF2 on the attacking side)."""
    raw = Raw(port)
    try:
        assert raw.request(17, 1, mechanism="SCRAM-SHA-512").error_code == 0  # type: ignore[attr-defined]
        bare = f"n={user},r={base64.b64encode(os.urandom(18)).decode()}"
        first = raw.request(36, 2, auth_bytes=f"n,,{bare}".encode()).auth_bytes.decode()  # type: ignore[attr-defined]
        fields = dict(item.split("=", 1) for item in first.split(","))
        if random_proof:
            proof = base64.b64encode(os.urandom(64)).decode()
            answer = raw.request(36, 2, auth_bytes=f"c=biws,r={fields['r']},p={proof}".encode())
            return answer.error_code == 58  # type: ignore[attr-defined]
        salted = hashlib.pbkdf2_hmac("sha512", b"not-the-password", base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", "sha512").digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{bare},{first},{without_proof}".encode()
        signature = hmac.new(hashlib.sha512(client_key).digest(), auth, "sha512").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        answer = raw.request(36, 2, auth_bytes=f"{without_proof},p={proof}".encode())
        return answer.error_code == 58  # type: ignore[attr-defined]
    finally:
        raw.sock.close()


def attacker(
    port: int, count: int, threads: int, offset: int, random_proof: bool, results: multiprocessing.Queue[int]
) -> None:
    refused = [0]
    lock = threading.Lock()

    def run(indexes: range) -> None:
        for i in indexes:
            user = USER if i % 2 else f"nobody-{i}"
            ok = failed_login(port, user, random_proof)
            with lock:
                refused[0] += ok

    per = [range(offset + t, offset + count, threads) for t in range(threads)]
    workers = [threading.Thread(target=run, args=(r,)) for r in per]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    results.put(refused[0])


def round_trips(bootstrap: str, n: int) -> list[float]:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "acks": "all",
            "linger.ms": 0,
        }
    )
    p.produce("bench", b"warm-up")
    assert p.flush(30) == 0
    times = []
    for i in range(n):
        start = time.perf_counter()
        p.produce("bench", b"m%d" % i)
        assert p.flush(30) == 0
        times.append((time.perf_counter() - start) * 1000)
    return times


def create_user(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-pw",
        }
    )
    upsertion = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORD.encode()
    )
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(30)


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 3), "p99_ms": round(ordered[int(len(ordered) * 0.99)], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logins", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--round-trips", type=int, default=300)
    parser.add_argument(
        "--random-proofs",
        action="store_true",
        help="attackers send random proofs (no PBKDF2 of their own: the broker's share alone)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        broker = BenchBroker(
            data_dir,
            **{
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            },
        )
        try:
            create_user(broker.bootstrap)
            quiet = round_trips(broker.bootstrap, args.round_trips)
            results: multiprocessing.Queue[int] = multiprocessing.Queue()
            per = args.logins // args.processes
            storm = [
                multiprocessing.Process(
                    target=attacker, args=(broker.port, per, args.threads, k * per, args.random_proofs, results)
                )
                for k in range(args.processes)
            ]
            started = time.perf_counter()
            for p in storm:
                p.start()
            stormy: list[float] = []
            while any(p.is_alive() for p in storm):
                stormy += round_trips(broker.bootstrap, 20)
            took = time.perf_counter() - started
            refused = sum(results.get() for _ in storm)
            for p in storm:
                p.join()
        finally:
            broker.stop()
    print(
        json.dumps(
            {
                "quiet": summary(quiet),
                "storm": summary(stormy),
                "storm_round_trips": len(stormy),
                "ratio_median": round(statistics.median(stormy) / statistics.median(quiet), 3),
                "failed_logins": refused,
                "storm_s": round(took, 2),
                "logins_per_s": round(refused / took, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
