"""The manager over a non-ORM store works in a process with no Django settings at all."""

from __future__ import annotations

import textwrap

from tests.processes import run_python

SCRIPT = textwrap.dedent(
    """
    import asyncio, os
    assert "DJANGO_SETTINGS_MODULE" not in os.environ
    from tulip_memory.manager import LLMMemoryManager, MemoryType, NoopMemoryManager
    from tulip_memory.manager.mem0 import Mem0MemoryManager
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState
    from tulip_memory.store import InMemoryStore

    def said(text):
        return AgentState(messages=[Message(Role.USER, text)])

    async def main():
        for mode in ("inline", "background"):
            manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=("t",), extract_mode=mode)
            await manager.on_session_end(said("I live in Lyon."))
            await manager.drain()
            await manager.on_session_end(said("I live in Paris."))
            await manager.drain()
            state = await manager.on_session_start(said("hi"))
            assert "The user lives in Paris." in state.messages[0].content
            history = [v.content for v in await manager.history(MemoryType.USER, "location")]
            assert history == ["The user lives in Lyon.", "The user lives in Paris."]
        assert await NoopMemoryManager().retrieve() == []

    asyncio.run(main())
    print("pure manager ok")
    """
)


def test_manager_works_without_django_settings():
    result = run_python(SCRIPT, django_settings=False)
    assert result.returncode == 0, result.stderr
    assert "pure manager ok" in result.stdout
