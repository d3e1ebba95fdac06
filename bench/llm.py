"""Benchmark of the LLM extractor: model calls and tokens per extracted run.

Runs every case of the labelled extraction corpus (tests/manager/consolidation_corpus.py)
through an :class:`~tulip_memory.manager.LLMMemoryManager` with an
:class:`~tulip_memory.manager.LLMExtractor` (``run_extraction``, what ``on_session_end``
and the Celery worker call; the figures are read from its outcome, i.e. from the
``memory.manager.extracted`` event's fields) into an InMemoryStore, against the chat-server
TEST DOUBLE of tests/llm/chat_server.py (scripted answers, no model): the figures are the
extractor's own cost, i.e. how many requests it makes per run and how large they are.
Tokens are what the double reports (characters of the request messages / 4, of the answer
/ 4), so they track prompt size, not a real tokenizer. Each run is then redelivered once
(it must cost nothing). Finally one long run (``--turns`` messages) shows the budget cut.

    .venv/bin/python bench/llm.py [--turns 400]

Needs no database: the store is in memory and Django settings are not configured.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _summary(name: str, values: list[float]) -> str:
    return (
        f"{name:<24} mean {statistics.mean(values):8.1f}   p50 {statistics.median(values):8.1f}"
        f"   max {max(values):8.1f}"
    )


async def corpus_part() -> None:
    from tests.llm.chat_server import ChatServerDouble
    from tests.manager.consolidation_corpus import CASES
    from tests.manager.consolidation_helpers import PREFIX, decisions, facts
    from tests.manager.test_consolidation_corpus import messages_of
    from tulip_memory.llm import ChatClient, LLMConfig
    from tulip_memory.manager import LLMExtractor, LLMMemoryManager, Memory, MemoryType
    from tulip_memory.store import InMemoryStore

    calls: list[float] = []
    prompt: list[float] = []
    completion: list[float] = []
    seconds: list[float] = []
    redelivered_calls = 0
    operations = 0
    with ChatServerDouble() as server:
        client = ChatClient(LLMConfig.from_dict({"BASE_URL": server.url, "MODEL": "bench"}))
        extractor = LLMExtractor(client)
        for case in CASES:
            manager = LLMMemoryManager(
                InMemoryStore(), namespace_prefix=PREFIX, extractor=extractor
            )
            await manager.save([Memory(MemoryType(t), k, c) for (t, k), c in case.existing.items()])
            server.add(facts(*case.facts))
            if case.decisions is not None:
                server.add(decisions(*case.decisions))
            started = time.perf_counter()
            outcome = await manager.run_extraction(messages_of(case))
            seconds.append((time.perf_counter() - started) * 1000)
            fields = outcome.event_fields()
            calls.append(fields["llm_calls"])
            prompt.append(fields["prompt_tokens"])
            completion.append(fields["completion_tokens"])
            operations += sum(n for event, n in fields["operations"].items() if event != "NONE")
            before = len(server.requests)
            again = await manager.run_extraction(messages_of(case))
            assert again.details["already_done"] and not again.memories
            redelivered_calls += len(server.requests) - before
        await client.aclose()
    print(f"\n== Extraction on the labelled corpus ({len(CASES)} runs, {operations} operations) ==")
    print(_summary("model calls / run", calls))
    print(_summary("prompt tokens / run", prompt))
    print(_summary("completion tokens / run", completion))
    print(_summary("ms / run (double)", seconds))
    print(f"{'total calls':<24} {sum(calls):.0f} (1 per run, +1 when related memories exist)")
    print(f"{'redelivered runs':<24} {redelivered_calls} model calls for {len(CASES)} redeliveries")


async def long_run_part(turns: int) -> None:
    from tests.llm.chat_server import ChatServerDouble
    from tests.manager.consolidation_helpers import PREFIX, conversation, facts
    from tulip_memory.llm import ChatClient, LLMConfig
    from tulip_memory.manager import LLMExtractor, LLMMemoryManager
    from tulip_memory.store import InMemoryStore

    messages = conversation(
        *(f"turn {i}: " + "we talked about the release plan " * 4 for i in range(turns))
    )
    with ChatServerDouble() as server:
        client = ChatClient(LLMConfig.from_dict({"BASE_URL": server.url, "MODEL": "bench"}))
        server.add(facts())
        manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=PREFIX)
        report = await LLMExtractor(client).run(messages, manager)
        await client.aclose()
    budget = client.config.input_token_budget
    print(f"\n== One long run: {turns} messages, INPUT_TOKEN_BUDGET {budget} ==")
    print(
        f"dropped {report.dropped_messages} oldest messages; prompt tokens reported "
        f"{report.usage.prompt_tokens} (budget estimate at 4 chars/token)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    args = parser.parse_args()
    # The corpus holds refused facts on purpose; their warnings are not benchmark output.
    logging.getLogger("tulip_memory").setLevel(logging.ERROR)
    asyncio.run(corpus_part())
    asyncio.run(long_run_part(args.turns))


if __name__ == "__main__":
    main()
