"""Histories the conversation tests work on: an agent loop with tool calls and a plain chat."""

from __future__ import annotations

from tulip_memory.messages import Message, Role, ToolCall


def system(text: str = "You are a helpful agent.", **metadata: object) -> Message:
    return Message(Role.SYSTEM, text, metadata=dict(metadata))


def user(text: str) -> Message:
    return Message(Role.USER, text)


def assistant(text: str = "", *calls: ToolCall) -> Message:
    return Message(Role.ASSISTANT, text, tool_calls=list(calls))


def call(call_id: str, name: str = "search", **arguments: object) -> ToolCall:
    return ToolCall(call_id, name, dict(arguments))


def result(call_id: str, text: str = "ok") -> Message:
    return Message(Role.TOOL, text, tool_call_id=call_id, name="search")


def tool_round(step: int, parallel: int = 1) -> list[Message]:
    """One assistant message calling ``parallel`` tools, then their results."""
    ids = [f"call-{step}-{i}" for i in range(parallel)]
    return [
        assistant("", *(call(i, q=f"step {step}") for i in ids)),
        *(result(i, f"result {i}") for i in ids),
    ]


def agent_loop(rounds: int, parallel: int = 1, leading: int = 1) -> list[Message]:
    """System prompt(s), one user task, then ``rounds`` tool round-trips."""
    history = [system(f"instructions {i}") for i in range(leading)]
    history.append(user("Find the cheapest flight to Lisbon."))
    for step in range(rounds):
        history.extend(tool_round(step, parallel))
    return history


def chat(turns: int, leading: int = 1) -> list[Message]:
    """System prompt(s), then ``turns`` user/assistant exchanges."""
    history = [system(f"instructions {i}") for i in range(leading)]
    for turn in range(turns):
        history.append(user(f"question {turn}"))
        history.append(assistant(f"answer {turn}"))
    return history


def tool_calls_unsplit(messages: list[Message]) -> bool:
    """No tool result without its call before it, no call whose present result is missing."""
    called: set[str] = set()
    for message in messages:
        if message.role == Role.ASSISTANT:
            called.update(c.id for c in message.tool_calls)
        elif message.role == Role.TOOL and message.tool_call_id not in called:
            return False
    answered = {m.tool_call_id for m in messages if m.role == Role.TOOL}
    return called <= answered


def leading_tool_free(messages: list[Message]) -> bool:
    """The first non-system message is not a tool result."""
    for message in messages:
        if message.role != Role.SYSTEM:
            return message.role != Role.TOOL
    return True
