"""The embedded broker (evalsite/broker.py): whole messages only, and a publish wakes its own process."""

from __future__ import annotations

import threading
import time

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue


@pytest.fixture
def connection(tmp_path):
    folder = tmp_path / "queue"
    folder.mkdir()
    # A poll interval far longer than the drain timeout: only the in-process wake-up can deliver in time.
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "polling_interval": 30,
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    with Connection(transport="evalsite.broker:Transport", transport_options=options) as conn:
        yield conn


def test_a_message_published_in_this_process_wakes_the_waiting_consumer(connection):
    queue = Queue("wake", Exchange("wake", type="direct"), routing_key="wake")
    received = []
    with Consumer(connection.channel(), [queue], callbacks=[lambda body, message: received.append(body)]):
        publisher = threading.Timer(
            0.3, lambda: Producer(connection.clone().channel()).publish(
                {"n": 1}, exchange=queue.exchange, routing_key="wake", declare=[queue]
            )
        )  # fmt: skip
        publisher.start()
        # drain_events finds no message and waits; without the wake-up it would look again only after its
        # poll interval (30 s, capped at the 20 s timeout). Not a speed test: the margin is 20 s against 0.3.
        started = time.monotonic()
        connection.drain_events(timeout=20)
        waited = time.monotonic() - started
        publisher.join()
    assert received == [{"n": 1}]
    assert waited < 10


def test_an_empty_poll_hands_control_back_to_the_worker_loop(tmp_path):
    # Celery acknowledges a finished task of its thread pool only between two drains; a drain that kept
    # polling until its timeout (kombu's 2 s in a worker) held the acknowledgements, and the prefetch
    # slots with them, for that long.
    folder = tmp_path / "queue"
    folder.mkdir()
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "polling_interval": 0.05,
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    queue = Queue("idle", Exchange("idle", type="direct"), routing_key="idle")
    with (
        Connection(transport="evalsite.broker:Transport", transport_options=options) as conn,
        Consumer(conn.channel(), [queue], callbacks=[lambda body, message: None]),
    ):
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=20)
        waited = time.monotonic() - started
    assert waited < 10  # one poll interval (50 ms), not the 20 s timeout


def test_messages_are_written_whole_under_their_final_name(connection, tmp_path):
    queue = Queue("whole", Exchange("whole", type="direct"), routing_key="whole")
    producer = Producer(connection.channel())
    producer.publish({"text": "x" * 100_000}, exchange=queue.exchange, routing_key="whole", declare=[queue])
    names = [path.name for path in (tmp_path / "queue").iterdir()]
    assert len(names) == 1 and names[0].endswith(".whole.msg") and not names[0].startswith(".")


def test_a_half_written_message_is_not_listed_by_any_kombu_rule(connection, tmp_path, monkeypatch):
    # kombu before 5.7 takes every file whose name holds ".<queue>.msg"; 5.7 takes a name whose part after the
    # first dot is "<queue>.msg". A temporary name matching either was read empty by the other worker, whose
    # JSONDecodeError ended it.
    from evalsite import broker

    seen = []
    replace = broker.os.replace

    def listing_then_replace(source, destination):
        seen.extend(path.name for path in (tmp_path / "queue").iterdir())
        replace(source, destination)

    monkeypatch.setattr(broker.os, "replace", listing_then_replace)
    queue = Queue("half", Exchange("half", type="direct"), routing_key="half")
    Producer(connection.channel()).publish(
        {"n": 1}, exchange=queue.exchange, routing_key="half", declare=[queue]
    )
    assert len(seen) == 1  # the temporary file, before its rename
    assert ".half.msg" not in seen[0] and seen[0].partition(".")[2] != "half.msg"


def test_a_file_that_is_not_a_message_is_skipped_not_fatal(connection, tmp_path, caplog):
    queue = Queue("junk", Exchange("junk", type="direct"), routing_key="junk")
    received = []
    with Consumer(connection.channel(), [queue], callbacks=[lambda body, message: received.append(body)]):
        # named to sort before any message this process writes, so it is read first
        (tmp_path / "queue" / "0_left-by-a-crash.junk.msg").write_bytes(b"")
        Producer(connection.channel()).publish(
            {"n": 1}, exchange=queue.exchange, routing_key="junk", declare=[queue]
        )
        connection.drain_events(timeout=20)
    assert received == [{"n": 1}]
    assert "not a message" in caplog.text
