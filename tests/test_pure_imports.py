"""The pure layers import and work in a Python process with no Django settings at all."""

import textwrap

from tests.processes import run_python

SCRIPT = textwrap.dedent(
    """
    import asyncio, os
    assert "DJANGO_SETTINGS_MODULE" not in os.environ
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState
    from tulip_memory.events import emit_sync, memory_event
    from tulip_memory.conversation import SlidingWindowManager, SummarizingManager, NullManager
    from tulip_memory.store import InMemoryStore, HolographicStore, NamespacedStore, StoreItem
    from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType, MemoryScope
    from tulip_memory.delta import DeltaCheckpointer, InMemoryDeltaStorage
    from tulip_memory.registry import get_checkpointer, list_checkpointers

    msgs = [Message(Role.SYSTEM, "s")] + [Message(Role.USER, f"m{i}") for i in range(30)]
    assert len(SlidingWindowManager(window_size=5).apply(msgs)) <= 6
    emit_sync("memory.test")

    async def main():
        for store in (InMemoryStore(), HolographicStore()):
            await store.put(("t", "u"), "k", {"text": "tulips in spring"})
            assert (await store.get(("t", "u"), "k")) == {"text": "tulips in spring"}
            await store.close()
        delta = DeltaCheckpointer(InMemoryDeltaStorage())
        cid = await delta.save(AgentState(messages=msgs), "thread")
        assert (await delta.load("thread", cid)).messages == msgs
        memory = get_checkpointer("memory")
        await memory.save(AgentState(messages=msgs), "t1")
        assert (await memory.load("t1")).messages == msgs

    asyncio.run(main())
    print("pure ok")
    """
)


def test_pure_layers_work_without_django_settings():
    result = run_python(SCRIPT, django_settings=False)
    assert result.returncode == 0, result.stderr
    assert "pure ok" in result.stdout
