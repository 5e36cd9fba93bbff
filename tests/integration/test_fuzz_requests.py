"""Every request kio can encode, for every API and version herd serves, gets an answer on a connection that
stays open: herd answers what it cannot honour with Kafka's error codes instead of failing in a handler (which
closes the connection). Requests are drawn by Hypothesis from kio's own request classes (`from_type`), so
they are well-formed on the wire but arbitrary in content: empty and huge names, negative counts and
timeouts, garbage record bytes, unknown ids.

A few requests have no answer or may legitimately wait: Produce with acks=0 (never answered) and Fetch with a
long max wait (a long poll) are drawn with that taken out; a JoinGroup or SyncGroup may be parked until the
rebalance it starts or waits for completes (up to its rebalance timeout), so for those an answer is checked
when one comes within a few seconds, and otherwise only that the connection was not closed."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import pytest
from brokers import BrokerProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.static.primitive import Records
from rawkafka import RawClient

from herd.coordinator import Record
from herd.protocol.messages import request_class, response_class
from herd.runtime.batches import encode_batch
from herd.server import apis

PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP, SHARE_FETCH = 0, 1, 11, 14, 78
MAY_PARK = {JOIN_GROUP, SYNC_GROUP}
# Record data is opaque bytes to kio: garbage, and now and then a valid batch (Produce must take it).
VALID_BATCH = encode_batch((Record(b"k", b"value"),), 0)
st.register_type_strategy(Records, st.one_of(st.binary(max_size=200), st.just(VALID_BATCH)).map(Records))
CASES = [
    (spec.key, version) for spec in apis.table().values() for version in range(spec.min_version, spec.max_version + 1)
]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data", {"offsets.topic.num.partitions": "2"}).start()
    yield b
    b.stop()


def requests(api_key: int, version: int) -> st.SearchStrategy[Any]:
    strategy = st.from_type(request_class(api_key, version))
    if api_key == PRODUCE:
        strategy = strategy.filter(lambda r: r.acks != 0)
    if api_key in (FETCH, SHARE_FETCH):  # a long poll answers after max_wait
        strategy = strategy.filter(lambda r: r.max_wait < datetime.timedelta(milliseconds=200))
    return strategy


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{apis.table()[k].name}-v{v}" for k, v in CASES])
@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_any_encodable_request_is_answered_and_the_connection_stays_open(
    fuzz_broker: BrokerProcess, api_key: int, version: int, data: st.DataObject
) -> None:
    request = data.draw(requests(api_key, version), label="request")
    with RawClient(fuzz_broker.port, timeout=3 if api_key in MAY_PARK else 10) as client:
        frame = client.encode(api_key, version, request)
        client.send_raw(frame)
        try:
            answer = client.recv_frame()  # ConnectionError if the broker closed the connection instead
        except TimeoutError:
            if api_key in MAY_PARK:
                return  # parked in a rebalance, on a connection that is still open
            raise
        assert struct.unpack_from(">i", answer)[0] == struct.unpack_from(">i", frame, 8)[0]  # its correlation id
        cls = response_class(api_key, version)
        _, offset = entity_reader(cls.__header_schema__)(answer, 0)
        entity_reader(cls)(answer, offset)  # a well-formed answer of the request's version
        # And the same connection still serves: ApiVersions v0 answers.
        client.request(18, 0, request_class(18, 0)())
