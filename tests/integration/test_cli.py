"""`herd serve` as a user runs it: bad arguments get one line, signals stop it cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from rawkafka import RawClient


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "herd.cli", "serve", *args], capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize(
    "args,message",
    [
        (["--override", "bogus.key=1"], "unknown setting 'bogus.key'"),
        (["--override", "num.partitions=x"], "num.partitions: 'x' is not a whole number"),
        (["--override", "novalue"], "--override expects key=value"),
        (["--config", "/nonexistent/server.properties"], "cannot read config file"),
        (["--no-such-flag"], "No such option"),
        (
            ["--override", "listeners=PLAINTEXT://127.0.0.1:99999"],
            "listeners: 'PLAINTEXT://127.0.0.1:99999': port 99999 is out of range [0, 65535]",
        ),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(args, message):
    result = _serve(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_port_in_use_is_one_line(broker, tmp_path):
    result = _serve(
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{broker.port}", "--override", f"log.dirs={tmp_path / 'other'}"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "error" in result.stderr.lower()


def test_log_dirs_naming_a_file_is_one_line_with_the_path(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    result = _serve("--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={afile}")
    assert result.returncode == 2
    assert result.stderr.strip() == f"herd: error: log.dirs: '{afile}' is a file, not a directory"
    assert afile.read_text() == "not a directory"


def test_unresolvable_listener_host_is_one_line_naming_the_host(tmp_path):
    result = _serve(
        "--override", "listeners=PLAINTEXT://no-such-host.invalid:0", "--override", f"log.dirs={tmp_path / 'data'}"
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("herd: error: cannot listen on no-such-host.invalid:0: "), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_finishes_in_flight_replies_and_exits_0(broker_factory, sig):
    broker = broker_factory({"num.partitions": "1"})
    with RawClient(broker.port) as client:
        client.request(
            3,
            12,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name="quiet"),),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
        )
        # A long-polling fetch is in flight when the signal arrives; it still gets its answer.
        client.send_raw(
            client.encode(
                1,
                12,
                FetchRequest(
                    max_wait=__import__("datetime").timedelta(milliseconds=1500),
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    rack_id="",
                    forgotten_topics_data=(),
                    topics=(
                        FetchTopic(
                            topic="quiet",
                            partitions=(FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),),
                        ),
                    ),
                ),
            )
        )
        time.sleep(0.2)
        broker.proc.send_signal(sig)
        started = time.monotonic()
        response = client.read_response(1, 12)
        assert response.responses[0].topic == "quiet"
        assert response.responses[0].partitions[0].error_code == 0
        assert time.monotonic() - started > 0.5  # it was answered when its wait ended, not cut short
    assert broker.proc.wait(20) == 0
    assert "herd stopped" in broker.log()
