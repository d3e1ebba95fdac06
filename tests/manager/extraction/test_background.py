"""Background extraction outlives the event loop that submitted it (``asyncio.run`` per
request, ``async_to_sync``), and a cancelled extraction is reported, never silent."""

from __future__ import annotations

import asyncio
import logging
import textwrap

import pytest
from asgiref.sync import async_to_sync

from tests.manager.conftest import manager_events
from tests.processes import run_python
from tulip_memory.events import EV_MEMORY_MANAGER_EXTRACT_FAILED, EV_MEMORY_MANAGER_EXTRACTED
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.extraction.background import _NO_THREADS_AT_EXIT
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState
from tulip_memory.store.memory import InMemoryStore

NS = ("acme", "users", "u1")


def _state(text: str) -> AgentState:
    return AgentState(messages=[Message(Role.USER, text)], metadata={})


async def _slow_extractor(messages):
    await asyncio.sleep(0.05)  # still running when the submitting loop ends
    return [Memory(MemoryType.USER, "said", messages[-1].content)]


def test_an_extraction_submitted_under_asyncio_run_completes_after_its_loop_ends(sent_events):
    store = InMemoryStore()
    manager = LLMMemoryManager(
        store, namespace_prefix=NS, extract_fn=_slow_extractor, extract_mode="background"
    )

    async def request() -> None:
        await manager.on_session_end(_state("I live in Lisbon."))

    asyncio.run(request())  # the request's loop ends here, its extraction not yet done
    assert manager.pending_extractions == 1
    asyncio.run(manager.drain())  # drained from another loop
    assert manager.pending_extractions == 0
    item = async_to_sync(store.get_item)((*NS, "user"), "said")
    assert item is not None and item.value["content"] == "I live in Lisbon."
    assert [name for name, _ in manager_events(sent_events)] == [EV_MEMORY_MANAGER_EXTRACTED]


def test_the_submitters_scope_follows_the_job_and_async_to_sync_drains():
    store = InMemoryStore()
    manager = LLMMemoryManager(
        store, namespace_prefix=NS, extract_fn=_slow_extractor, extract_mode="background"
    )

    async def request() -> None:
        with manager.scoped(("beta", "users", "u2")):
            await manager.on_session_end(_state("I like tea."))

    async_to_sync(request)()
    async_to_sync(manager.drain)()
    assert async_to_sync(store.get)(("beta", "users", "u2", "user"), "said")["content"] == (
        "I like tea."
    )
    assert async_to_sync(store.get)((*NS, "user"), "said") is None


def test_a_cancelled_extraction_is_logged_and_emitted(sent_events, caplog):
    async def cancelled(messages):
        raise asyncio.CancelledError("the extractor's call was cancelled")

    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=NS, extract_fn=cancelled, extract_mode="background"
    )

    async def request() -> None:
        await manager.on_session_end(_state("hi"))
        await manager.drain()

    with caplog.at_level(logging.ERROR, logger="tulip_memory.manager"):
        asyncio.run(request())
    failed = [
        payload
        for name, payload in manager_events(sent_events)
        if name == EV_MEMORY_MANAGER_EXTRACT_FAILED
    ]
    assert [(p["error_type"], p["mode"]) for p in failed] == [("CancelledError", "background")]
    assert "memory extraction failed" in caplog.text
    assert manager.pending_extractions == 0


def test_pending_extractions_are_drained_at_interpreter_exit():
    script = textwrap.dedent(
        """
        import asyncio
        from tulip_memory.events import memory_event
        from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
        from tulip_memory.messages import Message, Role
        from tulip_memory.state import AgentState
        from tulip_memory.store.memory import InMemoryStore

        async def extractor(messages):
            await asyncio.sleep(0.3)
            return [Memory(MemoryType.USER, "said", messages[-1].content)]

        def receiver(sender, event, payload, **kwargs):
            if event.startswith("memory."):  # the manager's, not its store's
                print("event", event, flush=True)

        memory_event.connect(receiver, weak=False)
        manager = LLMMemoryManager(
            InMemoryStore(), namespace_prefix=("acme", "u1"), extract_fn=extractor,
            extract_mode="background",
        )

        async def request():
            state = AgentState(messages=[Message(Role.USER, "bye")], metadata={})
            await manager.on_session_end(state)

        asyncio.run(request())
        print("main done", manager.pending_extractions, flush=True)
        """
    )
    done = run_python(script, django_settings=False)
    assert done.returncode == 0, done.stderr
    if _NO_THREADS_AT_EXIT:
        # No thread can start once the main thread has ended (CPython gh-113964): the
        # sync receiver's thread cannot, the job fails, and a warning said it might.
        assert done.stdout.splitlines() == ["main done 1"]
        assert "1 background extraction(s) still pending at interpreter exit" in done.stderr
        assert "await manager.drain() before the process exits" in done.stderr
    else:
        assert done.stdout.splitlines() == ["main done 1", "event memory.manager.extracted"]
        assert "still pending" not in done.stderr


@pytest.mark.django_db(transaction=True)
def test_sync_code_submits_to_pgmemory_and_the_memory_is_saved():
    # A sync view: async_to_sync around the manager (sync_facade does the same). Its
    # thread's executor is gone when the job runs; the job's ORM calls must not need it.
    from tulip_memory.store import PgMemory
    from tulip_memory.sync_facade import sync_facade

    store = PgMemory()
    manager = LLMMemoryManager(
        store, namespace_prefix=NS, extract_fn=_slow_extractor, extract_mode="background"
    )
    async_to_sync(manager.on_session_end)(_state("I live in Porto."))
    async_to_sync(manager.drain)()
    facade = sync_facade(manager)
    with manager.scoped(("acme", "users", "u3")):
        facade.on_session_end(_state("I live in Faro."))
    facade.drain()
    assert manager.pending_extractions == 0
    for namespace, said in ((NS, "I live in Porto."), (("acme", "users", "u3"), "I live in Faro.")):
        item = async_to_sync(store.get_item)((*namespace, "user"), "said")
        assert item is not None and item.value["content"] == said
