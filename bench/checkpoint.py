"""Benchmark of checkpoint storage: full snapshots, the reference's delta scheme, and ours.

A chat grows by one user and one assistant message per turn (about 200 characters each,
Zipf-distributed pseudo-words, so zlib finds roughly what it finds in prose), with a
``turn`` counter in the metadata. A checkpoint is saved after every turn.

Part 1 — in memory, 50, 100 and 200 turns; for each scheme: total stored bytes, the
ratio to full snapshots, and save / load p50 (load = the newest checkpoint, rebuilt
without any cache):

* ``full``: compact JSON of the whole state per checkpoint (what the File, Redis, S3,
  OpenSearch and ORM backends store);
* ``reference``: the reference's scheme, re-implemented here as the baseline: a zlib'd
  full snapshot when the parent's chain depth reaches ``max_chain_depth`` (5, so a full
  snapshot every 6th save), else a zlib'd delta (the appended messages, the metadata when
  it changed), loads walking the chain one record at a time;
* ``ours``: DeltaCheckpointer over InMemoryDeltaStorage (defaults: depth 5, level 6),
  and the same with ``compression_level=0`` (zlib stores, no compression), to show what
  the design saves without compression.

Part 2 — on an embedded PostgreSQL 18 (temporary folder), 200 turns: bytes the tables
hold (``pg_total_relation_size``: heap, TOAST and indexes) for PostgreSQLCheckpointer
(full JSONB snapshots), DeltaCheckpointer over ORMDeltaStorage, and LangGraph's
PostgresSaver (langgraph-checkpoint-postgres) fed the same conversation as a one-node
chat graph with the default ``messages`` channel: one checkpoint per turn whose messages
blob is the whole list (a new channel version each turn) plus the node's pending writes.
A real graph writes at least two checkpoints per invocation (input and node step), so
this is a lower bound for LangGraph. Save / load p50 are measured on the same database.

    .venv/bin/python bench/checkpoint.py [--turns 50 100 200] [--skip-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

from embedded_django import embedded_workdir, setup_django, table_bytes

from tulip_memory.backends.base import encode_state
from tulip_memory.delta import DeltaCheckpointer, InMemoryDeltaStorage
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "an", "el", "or", "us", "ix"]


class Chat:
    """Turns of a synthetic conversation: two ~200-character messages each."""

    def __init__(self, seed: int = 11, vocab_size: int = 3000) -> None:
        self.rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < vocab_size:
            words.add("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(1, 4))))
        self.words = sorted(words)
        self.weights = [1 / (rank + 1) for rank in range(vocab_size)]

    def text(self) -> str:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < 200:
            words.append(self.rng.choices(self.words, self.weights)[0])
        return " ".join(words)[:200].capitalize() + "."

    def states(self, turns: int) -> list[AgentState]:
        state = AgentState(metadata={"user": "u-42", "turn": 0}, thread_id="bench")
        states = []
        for turn in range(1, turns + 1):
            state.messages.append(Message(Role.USER, self.text()))
            state.messages.append(Message(Role.ASSISTANT, self.text()))
            state.metadata["turn"] = turn
            states.append(AgentState.from_checkpoint(state.to_checkpoint()))
        return states


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


# -- the two baselines (in memory) -----------------------------------------------------------


class FullSnapshots:
    """One compact JSON document per checkpoint."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}

    async def save(self, state: AgentState) -> str:
        checkpoint_id = uuid.uuid4().hex
        self.records[checkpoint_id] = encode_state(state)
        return checkpoint_id

    async def load_latest(self) -> AgentState:
        return AgentState.from_checkpoint(json.loads(self.records[next(reversed(self.records))]))

    def stored_bytes(self) -> int:
        return sum(len(r) for r in self.records.values())


class ReferenceScheme:
    """The reference's DeltaCheckpointer scheme: full every max_chain_depth + 1 saves."""

    def __init__(self, max_chain_depth: int = 5, level: int = 6) -> None:
        self.max_chain_depth = max_chain_depth
        self.level = level
        # id -> (parent id, chain depth, zlib data); the reference's cache is left out,
        # as loads here are measured without cache for every scheme.
        self.records: dict[str, tuple[str | None, int, bytes]] = {}
        self.last: tuple[str, dict[str, Any]] | None = None

    async def save(self, state: AgentState) -> str:
        checkpoint_id = uuid.uuid4().hex
        data = state.to_checkpoint()
        newest = next(reversed(self.records), None)
        if newest is None or self.records[newest][1] >= self.max_chain_depth:
            record = (None, 0, zlib.compress(json.dumps({"full": data}).encode(), self.level))
        else:
            parent = self.last[1] if self.last and self.last[0] == newest else self._rebuild(newest)
            old, new = parent["messages"], data["messages"]
            delta: dict[str, Any] = (
                {"append": new[len(old) :]} if new[: len(old)] == old else {"messages": new}
            )
            if data["metadata"] != parent["metadata"]:
                delta["metadata"] = data["metadata"]
            payload = zlib.compress(json.dumps(delta).encode(), self.level)
            record = (newest, self.records[newest][1] + 1, payload)
        self.records[checkpoint_id] = record
        self.last = (checkpoint_id, data)
        return checkpoint_id

    def _rebuild(self, checkpoint_id: str) -> dict[str, Any]:
        chain = []
        current: str | None = checkpoint_id
        while current is not None:
            parent, _, data = self.records[current]
            chain.append(json.loads(zlib.decompress(data)))
            current = parent
        state = chain.pop()["full"]
        for delta in reversed(chain):
            state["messages"] = state["messages"] + delta.get("append", [])
            state["messages"] = delta.get("messages", state["messages"])
            state["metadata"] = delta.get("metadata", state["metadata"])
        return state

    async def load_latest(self) -> AgentState:
        return AgentState.from_checkpoint(self._rebuild(next(reversed(self.records))))

    def stored_bytes(self) -> int:
        return sum(len(r[2]) for r in self.records.values())


class Ours:
    def __init__(self, compression_level: int = 6) -> None:
        self.storage = InMemoryDeltaStorage()
        self.checkpointer = DeltaCheckpointer(self.storage, compression_level=compression_level)

    async def save(self, state: AgentState) -> str:
        return await self.checkpointer.save(state, "bench")

    async def load_latest(self) -> AgentState:
        state = await DeltaCheckpointer(self.storage, cache_size=0).load("bench")
        assert state is not None
        return state

    async def stored_bytes_async(self) -> int:
        return (await self.checkpointer.get_storage_stats("bench"))["compressed_size"]


async def run_scheme(scheme: Any, states: list[AgentState], loads: int = 25) -> dict[str, float]:
    save_times = []
    for state in states:
        start = time.perf_counter()
        await scheme.save(state)
        save_times.append(time.perf_counter() - start)
    load_times = []
    for _ in range(loads):
        start = time.perf_counter()
        loaded = await scheme.load_latest()
        load_times.append(time.perf_counter() - start)
    assert loaded == states[-1], f"{type(scheme).__name__} rebuilt a different state"
    if hasattr(scheme, "stored_bytes_async"):
        stored = await scheme.stored_bytes_async()
    else:
        stored = scheme.stored_bytes()
    return {
        "bytes": stored,
        "save_p50": p50_ms(save_times),
        "save_p50_first10": p50_ms(save_times[:10]),
        "save_p50_last10": p50_ms(save_times[-10:]),
        "load_p50": p50_ms(load_times),
    }


async def in_memory(turns_list: list[int]) -> None:
    print("Part 1: in memory (bytes stored; p50 in ms)")
    header = f"{'turns':>5} {'scheme':<13} {'bytes':>10} {'vs full':>8} {'saving':>7} "
    print(header + f"{'save p50':>9} {'save 1-10':>9} {'save last10':>11} {'load p50':>9}")
    for turns in turns_list:
        states = Chat().states(turns)
        results = {
            "full": await run_scheme(FullSnapshots(), states),
            "reference": await run_scheme(ReferenceScheme(), states),
            "ours": await run_scheme(Ours(), states),
            "ours, no zlib": await run_scheme(Ours(compression_level=0), states),
        }
        full = results["full"]["bytes"]
        for name, r in results.items():
            print(
                f"{turns:>5} {name:<13} {r['bytes']:>10,} {r['bytes'] / full:>8.4f} "
                f"{1 - r['bytes'] / full:>7.2%} {r['save_p50']:>9.3f} "
                f"{r['save_p50_first10']:>9.3f} {r['save_p50_last10']:>11.3f} {r['load_p50']:>9.3f}"
            )
        ref = results["reference"]["bytes"]
        print(f"{turns:>5} ours / reference bytes: {results['ours']['bytes'] / ref:.4f}")


# -- PostgreSQL ----------------------------------------------------------------------------


async def orm_scheme(name: str, checkpointer: Any, states: list[AgentState], fresh: Any) -> dict:
    save_times = []
    for state in states:
        start = time.perf_counter()
        await checkpointer.save(state, "bench")
        save_times.append(time.perf_counter() - start)
    load_times = []
    for _ in range(25):
        start = time.perf_counter()
        loaded = await fresh().load("bench")
        load_times.append(time.perf_counter() - start)
    assert loaded == states[-1], name
    return {
        "save_p50": p50_ms(save_times),
        "save_p50_first10": p50_ms(save_times[:10]),
        "save_p50_last10": p50_ms(save_times[-10:]),
        "load_p50": p50_ms(load_times),
    }


def langgraph_run(url: str, states: list[AgentState]) -> dict:
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.postgres import PostgresSaver

    def lc(message: Message) -> Any:
        kind = HumanMessage if message.role == Role.USER else AIMessage
        return kind(content=message.content, id=uuid.uuid4().hex)

    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        config: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        history: list[Any] = []
        version = None
        save_times = []
        for step, state in enumerate(states):
            start = time.perf_counter()
            new = [lc(m) for m in state.messages[len(history) :]]
            history = [*history, *new]
            checkpoint = empty_checkpoint()
            version = saver.get_next_version(version, None)
            checkpoint["channel_values"] = {"messages": history, "turn": step + 1}
            checkpoint["channel_versions"] = {"messages": version, "turn": version}
            metadata = {"source": "loop", "step": step, "parents": {}}
            config = saver.put(config, checkpoint, metadata, {"messages": version, "turn": version})
            saver.put_writes(config, [("messages", new)], task_id=uuid.uuid4().hex)
            save_times.append(time.perf_counter() - start)
        load_times = []
        latest = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        for _ in range(25):
            start = time.perf_counter()
            loaded = saver.get_tuple(latest)
            load_times.append(time.perf_counter() - start)
        assert loaded is not None
        assert len(loaded.checkpoint["channel_values"]["messages"]) == len(states[-1].messages)
    return {
        "save_p50": p50_ms(save_times),
        "save_p50_first10": p50_ms(save_times[:10]),
        "save_p50_last10": p50_ms(save_times[-10:]),
        "load_p50": p50_ms(load_times),
    }


async def on_postgres(turns: int) -> None:
    from asgiref.sync import sync_to_async

    from tulip_memory.backends import PostgreSQLCheckpointer
    from tulip_memory.delta import ORMDeltaStorage

    print(f"\nPart 2: embedded PostgreSQL 18, {turns} turns (bytes in the tables; p50 in ms)")
    with embedded_workdir() as workdir:
        owner_url = (await sync_to_async(setup_django)(Path(workdir))).owner
        states = Chat().states(turns)
        results = {}
        full = PostgreSQLCheckpointer("default", tenant="bench")
        results["full (PostgreSQLCheckpointer)"] = await orm_scheme(
            "full", full, states, lambda: PostgreSQLCheckpointer("default", tenant="bench")
        )
        results["full (PostgreSQLCheckpointer)"]["bytes"] = table_bytes(
            owner_url, ["tulip_memory_checkpoint"]
        )
        ours = DeltaCheckpointer(ORMDeltaStorage("default", tenant="bench"))
        results["ours (ORMDeltaStorage)"] = await orm_scheme(
            "ours",
            ours,
            states,
            lambda: DeltaCheckpointer(ORMDeltaStorage("default", tenant="bench"), cache_size=0),
        )
        results["ours (ORMDeltaStorage)"]["bytes"] = table_bytes(
            owner_url, ["tulip_memory_delta_checkpoint", "tulip_memory_delta_block"]
        )
        # LangGraph's tables in the same database, as the owner role (its setup creates them).
        lg_url = owner_url
        results["LangGraph PostgresSaver"] = await sync_to_async(langgraph_run)(lg_url, states)
        results["LangGraph PostgresSaver"]["bytes"] = table_bytes(
            lg_url, ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
        )
        base = results["LangGraph PostgresSaver"]["bytes"]
        print(
            f"{'scheme':<32} {'table bytes':>12} {'vs LangGraph':>12} {'save p50':>9} "
            f"{'save 1-10':>9} {'save last10':>11} {'load p50':>9}"
        )
        for name, r in results.items():
            print(
                f"{name:<32} {r['bytes']:>12,} {r['bytes'] / base:>12.4f} {r['save_p50']:>9.3f} "
                f"{r['save_p50_first10']:>9.3f} {r['save_p50_last10']:>11.3f} {r['load_p50']:>9.3f}"
            )
        from django.db import connections

        await sync_to_async(connections.close_all)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    asyncio.run(in_memory(args.turns))
    if not args.skip_postgres:
        asyncio.run(on_postgres(max(args.turns)))


if __name__ == "__main__":
    main()
