"""runs.loop: a conversation's coroutine on the process's event loop, its database work in its own thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from runs.loop import Owner, event_loop


def test_calls_run_in_the_owner_thread_and_answer_the_coroutine():
    owner = Owner()
    here = threading.get_ident()
    seen = []

    def store(n: int) -> int:
        seen.append(threading.get_ident())
        return n * 2

    async def conversation() -> tuple[int, int]:
        assert threading.get_ident() != here  # the coroutine runs on the loop's thread
        return await owner.call(store, 1), await owner.call(store, 2)

    assert owner.play(conversation()) == (2, 4)
    assert seen == [here, here]


def test_an_exception_in_the_owner_reaches_the_coroutine_and_the_coroutines_reaches_the_owner():
    class LostClaim(Exception):
        pass

    owner = Owner()

    def lost() -> None:
        raise LostClaim()

    async def conversation() -> None:
        with pytest.raises(LostClaim):
            await owner.call(lost)
        raise ValueError("the conversation's own failure")

    with pytest.raises(ValueError, match="own failure"):
        owner.play(conversation())


def test_posts_run_in_order_and_before_play_returns_even_at_the_very_end():
    owner = Owner()
    notes: list[int] = []

    async def conversation() -> str:
        for n in range(5):
            owner.post(notes.append, n)
        return "done"  # posted just before the end: still served

    assert owner.play(conversation()) == "done"
    assert notes == [0, 1, 2, 3, 4]


def test_a_call_after_the_conversation_ended_fails_instead_of_waiting_forever():
    owner = Owner()
    owner.play(asyncio.sleep(0))

    async def late() -> None:
        await owner.call(lambda: None)

    with pytest.raises(RuntimeError, match="ended"):
        asyncio.run_coroutine_threadsafe(late(), event_loop()).result(timeout=5)


def test_many_conversations_share_one_loop_each_served_by_its_own_thread():
    results: dict[int, list[int]] = {}

    def play(n: int) -> None:
        owner = Owner()

        async def conversation() -> list[int]:
            out = []
            for turn in range(3):
                await asyncio.sleep(0.01)  # a model call: every conversation waits at once
                out.append(await owner.call(lambda t=turn: n * 10 + t))
            return out

        results[n] = owner.play(conversation())

    threads = [threading.Thread(target=play, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert results == {n: [n * 10, n * 10 + 1, n * 10 + 2] for n in range(20)}


def test_as_many_conversations_as_the_worker_holds_can_grade_beside_the_loop_at_once(monkeypatch):
    """Grading that may call a model (a judge) runs in a thread beside the loop; asyncio's default pool (6
    threads on two cores) would hold a worker of 50 conversations to six judges at a time. Every one of
    them waits at a barrier here, which opens only once all are in it at the same time."""
    import runs.loop as loop_module

    monkeypatch.setattr(loop_module, "_loop", None)  # a fresh loop, sized as a worker of 40 sizes it
    monkeypatch.setattr(loop_module, "grading_threads", 40)
    barrier = threading.Barrier(40, timeout=20)

    async def all_grading_at_once() -> list[int]:
        return await asyncio.gather(*(asyncio.to_thread(barrier.wait) for _ in range(40)))

    arrived = asyncio.run_coroutine_threadsafe(all_grading_at_once(), event_loop()).result(timeout=30)
    assert sorted(arrived) == list(range(40))
