"""The playground's agent: a scripted one offline, the configured chat model otherwise.

The scripted agent is deterministic (no network, the same answer for the same input): it
repeats what it understood and, when the memory layer recalled something at the start of
the session, says what it remembers. With ``TULIP_MEMORY["LLM"]["MODEL"]`` set, the chat
model answers instead (docs/llm.md), given exactly the messages the sliding window kept.
"""

from __future__ import annotations

from tulip_memory.llm import ChatClient, LLMConfig
from tulip_memory.messages import Message, Role

MEMORY_BLOCK = "tulip_memory_block"


def memory_block(messages: list[Message]) -> Message | None:
    """The memory block the manager injected at session start, if any."""
    for message in messages:
        if message.role is Role.SYSTEM and (message.metadata or {}).get(MEMORY_BLOCK):
            return message
    return None


def chat_model_configured() -> bool:
    return LLMConfig.from_settings().model is not None


def scripted_reply(context: list[Message]) -> str:
    said = next((m.content for m in reversed(context) if m.role is Role.USER), "")
    block = memory_block(context)
    remembered = [
        line.lstrip("- ").strip()
        for line in (block.content.splitlines() if block else [])
        if line.startswith("- ")
    ]
    first_answer = not any(m.role is Role.ASSISTANT for m in context)
    if remembered and first_answer:
        return f"Welcome back. What I remember: {' '.join(remembered)} You said: “{said}”"
    if remembered:
        return f"Noted: “{said}” — and I still remember: {' '.join(remembered)}"
    return (
        f"Noted: “{said}” I don't know anything about you yet: end the session and "
        "I will remember what matters."
    )


async def reply(context: list[Message]) -> tuple[str, str]:
    """The agent's answer to ``context`` and who gave it (``scripted`` or the model's name)."""
    if not chat_model_configured():
        return scripted_reply(context), "scripted"
    client = ChatClient()
    try:
        result = await client.complete(
            [{"role": m.role.value, "content": m.content} for m in context],
            max_tokens=400,
            purpose="playground",
        )
    finally:
        await client.aclose()
    return result.content or "", client.model
