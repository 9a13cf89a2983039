"""The embedded database's writer queue (evalsite/sqlite): one writer at a time across threads and processes.

Each test opens its own SQLite file through our backend with SQLite's busy timeout at zero, so a writer
that reached SQLite's own lock while another held it would fail at once with "database is locked"
instead of sleeping in SQLite's busy handler: passing means the writers queued in front of SQLite.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import traceback

import pytest
from django.db.utils import ConnectionHandler

from evalsite.sqlite.base import writer_lock


def connections_for(path) -> ConnectionHandler:
    return ConnectionHandler(
        {
            "default": {
                "ENGINE": "evalsite.sqlite",
                "NAME": str(path),
                "OPTIONS": {
                    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                    "transaction_mode": "IMMEDIATE",
                    "timeout": 0,
                },
            }
        }
    )


def write_many(path, count: int, tag: str) -> None:
    """`count` short transactions, each a read then a write (the count-then-claim shape of dispatch), plus
    as many single-statement writes outside a transaction."""
    from django.db import transaction

    handler = connections_for(path)
    connection = handler["default"]
    for n in range(count):
        with transaction.atomic(using="default"), connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM item")
            cursor.execute("INSERT INTO item (tag, n) VALUES (%s, %s)", [tag, n])
        with connection.cursor() as cursor:
            cursor.execute("UPDATE counter SET value = value + 1")
    handler.close_all()


def create_tables(path) -> None:
    handler = connections_for(path)
    with handler["default"].cursor() as cursor:
        cursor.execute("CREATE TABLE item (tag TEXT, n INTEGER)")
        cursor.execute("CREATE TABLE counter (value INTEGER)")
        cursor.execute("INSERT INTO counter (value) VALUES (0)")
    handler.close_all()


def read_back(path) -> tuple[int, int]:
    handler = connections_for(path)
    with handler["default"].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM item")
        items = cursor.fetchone()[0]
        cursor.execute("SELECT value FROM counter")
        counter = cursor.fetchone()[0]
    handler.close_all()
    return items, counter


def _child(path, count, tag, errors, ready, go) -> None:
    ready.release()
    go.wait(60)
    try:
        write_many(path, count, tag)
    except Exception:  # reported to the parent, which fails the test with it
        errors.put(f"{tag}: {traceback.format_exc()}")


def test_writer_processes_and_threads_queue_without_meeting_sqlites_lock(tmp_path, django_db_blocker):
    with django_db_blocker.unblock():  # our own database files, not the test database
        _write_from_processes_and_threads(tmp_path)


def _write_from_processes_and_threads(tmp_path) -> None:
    path = tmp_path / "shared.sqlite3"
    create_tables(path)
    context = multiprocessing.get_context("spawn")  # fresh interpreters, as separate worker processes are
    errors, ready, go = context.Queue(), context.Semaphore(0), context.Event()
    processes = [
        context.Process(target=_child, args=(path, 150, f"p{i}", errors, ready, go)) for i in range(3)
    ]
    thread_errors: list[str] = []

    def in_thread(tag: str) -> None:
        go.wait(60)
        try:
            write_many(path, 150, tag)
        except Exception as exc:
            thread_errors.append(f"{tag}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=in_thread, args=(f"t{i}",)) for i in range(3)]
    for worker in [*processes, *threads]:
        worker.start()
    for _ in processes:  # all writers start together, once the interpreters are up
        assert ready.acquire(timeout=60)
    go.set()
    for worker in [*processes, *threads]:
        worker.join(timeout=120)
    reported = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
    assert not reported and not thread_errors, reported + thread_errors
    assert all(process.exitcode == 0 for process in processes)
    assert read_back(path) == (6 * 150, 6 * 150)


def _forked_acquire(path, pipe) -> None:
    lock = writer_lock(str(path))
    started = time.monotonic()
    lock.acquire()
    pipe.send(time.monotonic() - started)
    lock.release()


@pytest.mark.parametrize("held_by_parent_at_fork", [False, True])
def test_a_forked_child_waits_for_its_parents_write_then_gets_its_own(tmp_path, held_by_parent_at_fork):
    # Celery's prefork pool forks from a process that may have written already. The child must neither
    # share the parent's lock (the same descriptor) nor inherit its thread lock in the held state.
    path = tmp_path / "forked.sqlite3"
    lock = writer_lock(str(path))
    lock.acquire()
    lock.release()  # the parent has a descriptor open, as a worker that wrote before forking
    if held_by_parent_at_fork:
        lock.acquire()
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context("fork").Process(target=_forked_acquire, args=(path, theirs))
    if not held_by_parent_at_fork:
        lock.acquire()
    child.start()
    try:
        time.sleep(0.3)
        assert not ours.poll(), "the child took the lock while the parent held it"
    finally:
        lock.release()
    assert ours.poll(10), "the child never got the lock after the parent released it"
    assert ours.recv() > 0.1  # it had been waiting
    child.join(10)
    assert child.exitcode == 0


def test_in_memory_databases_need_no_lock_file():
    lock = writer_lock(":memory:")
    assert lock.path is None
    lock.acquire()
    lock.release()
