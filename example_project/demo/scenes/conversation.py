"""Demo scene: a scripted tool-using agent run through SlidingWindowManager and SummarizingManager.

It prints the run, then what each manager kept, pruned and summarised, and the
memory_event events that fired. The summariser is scripted (a stand-in for an LLM call,
which this demo does not make).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tulip_memory.conversation import SlidingWindowManager, SummarizingManager
from tulip_memory.events import memory_event
from tulip_memory.messages import Message, Role, ToolCall

CONTENT_WIDTH = 78


def _tool_round(
    step: int, calls: list[tuple[str, dict[str, Any], str]], thought: str = ""
) -> list[Message]:
    """An assistant message calling tools, then one result per call."""
    tool_calls = [
        ToolCall(f"call_{step}_{i}", name, args) for i, (name, args, _) in enumerate(calls)
    ]
    results = [
        Message(Role.TOOL, output, tool_call_id=tool_call.id, name=tool_call.name)
        for tool_call, (_, _, output) in zip(tool_calls, calls, strict=True)
    ]
    return [Message(Role.ASSISTANT, thought, tool_calls=tool_calls), *results]


def scripted_run() -> list[Message]:
    """A travel agent's run: one request, then tool round-trips, a mid-run note, an answer."""
    return [
        Message(Role.SYSTEM, "You are a travel agent. Look prices up with tools; never guess."),
        Message(
            Role.USER,
            "Plan a weekend in Lisbon for two from Amsterdam, 14-16 March, under 600 EUR.",
        ),
        *_tool_round(
            1,
            [
                (
                    "search_flights",
                    {"from": "AMS", "to": "LIS", "out": "03-14", "back": "03-16"},
                    "TP663 11:10 118 EUR pp; KL1691 07:05 142 EUR pp",
                )
            ],
            "Flights first.",
        ),
        *_tool_round(
            2,
            [
                (
                    "search_hotels",
                    {"city": "Lisbon", "nights": 2, "guests": 2},
                    "Casa do Largo 81 EUR/night; Hotel Lumen 96 EUR/night",
                )
            ],
        ),
        *_tool_round(
            3,
            [
                ("get_weather", {"city": "Lisbon", "date": "03-14"}, "19 C, sunny"),
                ("get_weather", {"city": "Lisbon", "date": "03-15"}, "17 C, showers"),
            ],
        ),
        Message(Role.SYSTEM, "Note: the traveller's loyalty programme is Flying Blue."),
        *_tool_round(
            4,
            [("check_loyalty", {"programme": "Flying Blue"}, "TP663 earns no Flying Blue miles")],
        ),
        *_tool_round(
            5,
            [("book_flight", {"flight": "TP663", "passengers": 2}, "Booked TP663, 236 EUR")],
            "Cheapest flight wins on budget.",
        ),
        *_tool_round(
            6,
            [("book_hotel", {"hotel": "Casa do Largo", "nights": 2}, "Booked, 162 EUR")],
        ),
        *_tool_round(
            7,
            [
                ("find_restaurants", {"area": "Alfama", "budget": "mid"}, "Taberna da Rua 2"),
                ("find_restaurants", {"area": "Baixa", "budget": "mid"}, "Cervejaria Ramiro"),
            ],
        ),
        Message(
            Role.ASSISTANT,
            "Booked: TP663 (236 EUR) and Casa do Largo, 2 nights (162 EUR): 398 EUR in all. "
            "Saturday may bring showers; dinner ideas: Taberna da Rua 2, Cervejaria Ramiro.",
        ),
    ]


def _describe(message: Message) -> str:
    if message.tool_calls:
        calls = ", ".join(
            f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})"
            for c in message.tool_calls
        )
        text = f"{message.content} -> {calls}" if message.content else f"-> {calls}"
    elif message.role == Role.TOOL:
        text = f"[{message.name}] {message.content}"
    else:
        text = message.content
    text = " ".join(text.split())
    return text if len(text) <= CONTENT_WIDTH else text[: CONTENT_WIDTH - 1] + "…"


def _show(out: TextIO, messages: list[Message], positions: dict[int, int]) -> None:
    """One line per message; ``#nn`` is its place in the full run, ``new`` if it was written."""
    for message in messages:
        place = positions.get(id(message))
        label = f"#{place:02d}" if place is not None else "new"
        out.write(f"    {label:>4}  {message.role.value:<9} {_describe(message)}\n")


def _show_summary(out: TextIO, summary: Message) -> None:
    for line in summary.content.splitlines():
        out.write(f"          | {line}\n")


def _places(places: list[int]) -> str:
    """``[2, 3, 4, 9]`` -> ``#02-#04, #09``."""
    runs: list[list[int]] = []
    for place in sorted(places):
        if runs and place == runs[-1][-1] + 1:
            runs[-1].append(place)
        else:
            runs.append([place])
    return ", ".join(
        f"#{run[0]:02d}" if len(run) == 1 else f"#{run[0]:02d}-#{run[-1]:02d}" for run in runs
    )


def _show_events(out: TextIO, fired: list[tuple[str, dict[str, Any]]]) -> None:
    if not fired:
        out.write("  events fired: none\n")
        return
    out.write("  events fired:\n")
    for event, payload in fired:
        fields = " ".join(
            f"{key}={value:.2f}" if isinstance(value, float) else f"{key}={value}"
            for key, value in payload.items()
            if key != "strategy"
        )
        out.write(f"    * {event}  {fields}\n")
    fired.clear()


@contextmanager
def _recording_events() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Collect every memory_event sent inside the block."""
    fired: list[tuple[str, dict[str, Any]]] = []

    def receiver(sender: object, event: str, payload: dict[str, Any], **kwargs: Any) -> None:
        fired.append((event, payload))

    memory_event.connect(receiver, weak=False)
    try:
        yield fired
    finally:
        memory_event.disconnect(receiver)


@contextmanager
def _capturing_log(logger_name: str) -> Iterator[list[logging.LogRecord]]:
    """Collect the records of ``logger_name`` instead of printing their tracebacks."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger(logger_name)
    handler, propagate = Collect(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class ScriptedSummariser:
    """Stand-in for an LLM summariser: lists the notes and tool results of the span."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, messages: list[Message]) -> str:
        self.calls += 1
        lines = []
        for message in messages:
            if message.role == Role.SYSTEM:
                lines.append(message.content.rpartition("]:\n")[2])
            elif message.role == Role.TOOL:
                lines.append(f"{message.name}: {message.content}")
        return "\n".join(lines)


async def _failing_summariser(messages: list[Message]) -> str:
    raise ConnectionError("LLM endpoint unreachable")


def _cache_friendliness(manager: SlidingWindowManager, run: list[Message]) -> str:
    """Replay the run request by request: on which requests did the window's start move?"""
    moved, previous = [], manager.apply(run[:2])
    for length in range(3, len(run) + 1):
        current = manager.apply(run[:length])
        if current[: len(previous)] != previous:
            moved.append(length - 1)
        previous = current
    return (
        f"slide_step={manager.slide_step}: the prefix changed on {len(moved)} of "
        f"{len(run) - 2} requests (those adding {_places(moved) or 'none'}); the others only\n"
        "    appended to the previous request, so a provider's prompt cache serves them."
    )


async def conversation_scene(out: TextIO) -> None:
    run = scripted_run()
    positions = {id(message): place for place, message in enumerate(run)}
    out.write(f"A travel agent's run: {len(run)} messages, one user request, tool calls.\n")
    _show(out, run, positions)

    with _recording_events() as fired:
        window = SlidingWindowManager(window_size=8, slide_step=4)
        out.write(f"\n{window!r}\n")
        kept = await window.async_apply(run)
        kept_ids = {id(message) for message in kept}
        pruned = [place for key, place in positions.items() if key not in kept_ids]
        out.write(
            f"  kept {len(kept)} of {len(run)}, pruned {len(pruned)} ({_places(pruned)}).\n"
            "  The system prompt stays in front; the task (#01) is re-attached as no user\n"
            "  message was left; the window starts on a whole tool round-trip (#13 went).\n"
        )
        _show(out, kept, positions)
        _show_events(out, fired)
        for step in (1, 4):
            replay = SlidingWindowManager(window_size=8, slide_step=step)
            out.write(f"  {_cache_friendliness(replay, run)}\n")
        fired.clear()

        summariser = ScriptedSummariser()
        summarizing = SummarizingManager(threshold=12, keep_recent=4, summarize_fn=summariser)
        out.write("\nSummarizingManager(threshold=12, keep_recent=4, summarize_fn=<scripted>)\n")
        compacted = await summarizing.async_apply(run)
        summary = next(m for m in compacted if id(m) not in positions)
        gone = [place for key, place in positions.items() if key not in map(id, compacted)]
        out.write(
            f"  kept {len(compacted) - 1} of {len(run)}; summarised {len(gone)} "
            f"({_places(gone)}, the mid-run note #09 among them) into one system message.\n"
        )
        _show(out, compacted, positions)
        out.write("  the summary message:\n")
        for line in summary.content.splitlines():
            out.write(f"          | {line}\n")
        _show_events(out, fired)

        follow_up = Message(Role.USER, "Thanks! Can you add a day trip to Sintra?")
        positions[id(follow_up)] = len(run)
        grown = [*run, follow_up]
        again = await summarizing.async_apply(grown)
        out.write(
            f"\nThe run grows by one message (#{len(run):02d}); applied again:\n"
            f"  summary reused from the cache: {again[1] == summary} "
            f"(summarize_fn calls so far: {summariser.calls})\n"
            f"  the previous output is a prefix of this one: "
            f"{again[: len(compacted)] == compacted}\n"
        )
        _show_events(out, fired)

        failing = SummarizingManager(threshold=12, keep_recent=4, summarize_fn=_failing_summariser)
        out.write("\nThe same with a summariser that raises (an LLM outage):\n")
        with _capturing_log("tulip_memory.conversation") as records:
            unchanged = await failing.async_apply(grown)
        out.write(
            f"  history returned un-summarised: {unchanged == grown} "
            f"({len(unchanged)} messages, nothing lost)\n"
        )
        for record in records:
            out.write(f"  logged: {record.levelname} {record.name}: {record.getMessage()}\n")
        _show_events(out, fired)
