"""Benchmark of conversation management: ``apply()`` on histories of 1k, 10k and 100k messages.

Two histories: a tool-using agent loop (one task, then assistant tool calls and their
results, a few mid-run notes) and a plain chat (user/assistant turns). For each manager
it prints the time per call, the time per message of the history, and the 100k/10k ratio
of the time per call (10 means linear growth). Times are the best of several calls.

    .venv/bin/python bench/conversation.py [--sizes 1000 10000 100000] [--min-time 0.3]

Pure Python: needs no database and no Django settings.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable

from tulip_memory.conversation import (
    ConversationManager,
    NullManager,
    SlidingWindowManager,
    SummarizingManager,
)
from tulip_memory.messages import Message, Role, ToolCall


def agent_loop(size: int) -> list[Message]:
    history = [
        Message(Role.SYSTEM, "You are a research agent. Use the tools."),
        Message(Role.USER, "Collect every price of the catalogue and report the cheapest."),
    ]
    step = 0
    while len(history) < size:
        ids = [f"call-{step}-{i}" for i in range(1 + step % 3)]
        history.append(
            Message(
                Role.ASSISTANT,
                "Next page." if step % 4 == 0 else "",
                tool_calls=[ToolCall(i, "fetch_page", {"page": step}) for i in ids],
            )
        )
        history.extend(
            Message(Role.TOOL, f"page {step}: 20 items, 12.50 to 80.00 EUR", tool_call_id=i)
            for i in ids
        )
        if step % 50 == 49:
            history.append(Message(Role.SYSTEM, f"Note: {step + 1} pages read."))
        step += 1
    return history[:size]


def chat(size: int) -> list[Message]:
    history = [Message(Role.SYSTEM, "You are a helpful assistant.")]
    turn = 0
    while len(history) < size:
        history.append(Message(Role.USER, f"Question {turn}: what about option {turn % 7}?"))
        history.append(Message(Role.ASSISTANT, f"Answer {turn}: option {turn % 7} is fine."))
        turn += 1
    return history[:size]


def _cold_summarizing() -> ConversationManager:
    return SummarizingManager(threshold=30, keep_recent=10)


# name -> factory called once per timed call (cold) or once per history (warm).
MANAGERS: list[tuple[str, Callable[[], ConversationManager], bool]] = [
    ("NullManager", NullManager, False),
    ("SlidingWindow(20)", SlidingWindowManager, False),
    ("SlidingWindow(20, slide_step=5)", lambda: SlidingWindowManager(20, slide_step=5), False),
    ("Summarizing(30, 10) cold: summarises", _cold_summarizing, True),
    ("Summarizing(30, 10) warm: cached", _cold_summarizing, False),
]


def time_per_call(
    make: Callable[[], ConversationManager], fresh: bool, history: list[Message], min_time: float
) -> float:
    """Best time in seconds of one apply() (a fresh manager per call when ``fresh``).

    Like timeit: the garbage collector is off while timing and the minimum is reported,
    the least disturbed by other processes on the machine.
    """
    manager = make()
    manager.apply(history)  # warm-up (and, for the cached case, fill the cache)
    samples: list[float] = []
    started = time.perf_counter()
    gc.disable()
    try:
        while len(samples) < 5 or time.perf_counter() - started < min_time:
            if fresh:
                manager = make()
            begin = time.perf_counter()
            manager.apply(history)
            samples.append(time.perf_counter() - begin)
    finally:
        gc.enable()
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    options = parser.parse_args()
    sizes = sorted(options.sizes)

    for history_name, build in (("agent loop", agent_loop), ("plain chat", chat)):
        histories = {size: build(size) for size in sizes}
        print(f"\n{history_name}")
        header = f"  {'manager':<38}" + "".join(f"{f'{size:,} msgs':>26}" for size in sizes)
        if len(sizes) > 1:
            header += f"  {f'{sizes[-1]:,}/{sizes[-2]:,}':>16}"
        print(header)
        for name, make, fresh in MANAGERS:
            per_call = {
                size: time_per_call(make, fresh, histories[size], options.min_time)
                for size in sizes
            }
            row = f"  {name:<38}"
            for size in sizes:
                seconds = per_call[size]
                row += f"{seconds * 1e3:>10.3f} ms/call {seconds / size * 1e6:>6.3f} µs/msg"
            if len(sizes) > 1:
                row += f"  {per_call[sizes[-1]] / per_call[sizes[-2]]:>15.1f}x"
            print(row)
    print(
        "\nNullManager only validates and copies the list (C speed): its ratio is the floor set"
        "\nby the memory hierarchy; a manager whose ratio tracks it grows linearly."
    )


if __name__ == "__main__":
    main()
