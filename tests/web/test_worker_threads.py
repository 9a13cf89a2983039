"""A worker's threads carry their names to the operating system, where `top -H` and the benchmark's CPU by
thread read them."""

import sys
import threading
from pathlib import Path

import pytest

from runs.worker.threads import OS_NAME_LENGTH, started

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _system_name_inside(name: str) -> str:
    seen = []

    def target() -> None:
        seen.append(Path(f"/proc/self/task/{threading.get_native_id()}/comm").read_text().strip())

    started(target, name).join(timeout=5)
    return seen[0]


def test_a_worker_thread_is_named_for_the_system():
    assert _system_name_inside("evalsite-pump") == "evalsite-pump"


def test_a_long_name_keeps_what_the_system_keeps():
    assert _system_name_inside("evalsite-a-very-long-name") == "evalsite-a-very-long-name"[:OS_NAME_LENGTH]
