"""The ConversationManager contract, NullManager, and use without Django settings."""

from __future__ import annotations

import copy
import textwrap

import pytest

from tests.conversation.histories import agent_loop, user
from tests.processes import run_python
from tulip_memory.conversation import ConversationManager, NullManager
from tulip_memory.messages import Message


def test_conversation_manager_is_abstract():
    with pytest.raises(TypeError):
        ConversationManager()  # type: ignore[abstract]


async def test_async_apply_defaults_to_apply():
    class Reversing(ConversationManager):
        def apply(self, messages: list[Message]) -> list[Message]:
            return list(reversed(messages))

    history = agent_loop(2)
    assert await Reversing().async_apply(history) == history[::-1]


async def test_null_manager_keeps_everything_in_a_new_list(events):
    history = agent_loop(30)
    snapshot = copy.deepcopy(history)
    for managed in (NullManager().apply(history), await NullManager().async_apply(history)):
        assert managed == history
        assert managed is not history
    assert history == snapshot
    assert events == []


def test_null_manager_rejects_bad_messages():
    with pytest.raises(ValueError, match=r"messages\[1\]"):
        NullManager().apply([user("x"), "not a message"])


def test_the_conversation_layer_works_without_django_settings():
    script = textwrap.dedent(
        """
        import asyncio
        from django.conf import settings
        from tulip_memory.conversation import SlidingWindowManager, SummarizingManager
        from tulip_memory.events import memory_event
        from tulip_memory.messages import Message, Role

        seen = []
        memory_event.connect(lambda sender, event, payload, **kw: seen.append(event), weak=False)
        history = [Message(Role.SYSTEM, "s")] + [Message(Role.USER, str(i)) for i in range(40)]
        assert len(SlidingWindowManager(window_size=5).apply(history)) == 6
        assert len(asyncio.run(SummarizingManager().async_apply(history))) <= 32
        assert not settings.configured
        print(",".join(seen))
        """
    )
    completed = run_python(script, django_settings=False)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == (
        "memory.conversation.pruned,memory.compactor.triggered,memory.compactor.completed"
    )
