"""Demo scene: checkpoints — a 60-turn chat kept by the DeltaCheckpointer in PostgreSQL.

It saves the chat after every turn (tenant ``demo``, row-level security on), shows what
is stored against full snapshots, the tail of the delta chain, a fresh rebuild, an edit
of an early message, pruning, and the registry's providers.
"""

from __future__ import annotations

import random
import tempfile
from typing import TextIO

from tulip_memory.backends.base import encode_state
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.messages import Message, Role
from tulip_memory.registry import get_checkpointer, list_checkpointers
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_context

THREAD = "demo-gardening-chat"
TURNS = 58
TOPICS = ["tulips", "soil", "frost", "watering", "bulbs", "compost", "shade", "pests"]


def _turn(rng: random.Random, turn: int) -> list[Message]:
    topic = rng.choice(TOPICS)
    question = f"Turn {turn}: what should I do about {topic} this week? " + "Details please. " * 8
    answer = f"For {topic}: check daily, act early, note what changed. " * 4
    return [Message(Role.USER, question[:200]), Message(Role.ASSISTANT, answer[:200])]


async def checkpoints_scene(out: TextIO) -> None:
    with tenant_context("demo"):
        storage = ORMDeltaStorage("default")
        checkpointer = DeltaCheckpointer(storage, max_chain_depth=5)
        await checkpointer.delete(THREAD)  # the demo database outlives runs
        rng = random.Random(4)
        state = AgentState(messages=[Message(Role.SYSTEM, "You are a gardening assistant.")])
        full_bytes = 0
        for turn in range(1, TURNS + 1):
            state.messages.extend(_turn(rng, turn))
            state.metadata["turn"] = turn
            await checkpointer.save(state, THREAD)
            full_bytes += len(encode_state(state))

        stats = await checkpointer.get_storage_stats(THREAD)
        stored = stats["compressed_size"]
        out.write(
            f"Saved {TURNS} turns ({len(state.messages)} messages) to PostgreSQL, tenant 'demo':\n"
            f"  {stats['total_checkpoints']} checkpoints: {stats['full_checkpoints']} full, "
            f"{stats['delta_checkpoints']} deltas, {stats['blocks']} message blocks\n"
            f"  stored {stored:,} bytes; full snapshots would be {full_bytes:,} bytes "
            f"-> {1 - stored / full_bytes:.1%} less\n"
        )

        out.write("The newest checkpoints, newest first (a full one refers to blocks):\n")
        for checkpoint_id in await checkpointer.list_checkpoints(THREAD, limit=7):
            meta = await checkpointer.get_metadata(THREAD, checkpoint_id)
            assert meta is not None
            kind = (
                f"full, {len(meta.blocks)} blocks"
                if meta.is_full
                else f"delta of {meta.parent_id[-6:]}"
            )
            out.write(
                f"  ...{checkpoint_id[-6:]}  depth {meta.chain_depth}  {kind:<17} "
                f"{meta.compressed_size_bytes:>5} bytes\n"
            )

        fresh = DeltaCheckpointer(ORMDeltaStorage("default"), cache_size=0)
        rebuilt = await fresh.load(THREAD)
        out.write(
            f"A fresh checkpointer (no cache) rebuilt the newest state in 2 reads: "
            f"equal={rebuilt == state}\n"
        )

        state.messages[3] = Message(Role.USER, "Turn 2 (edited): what about tulips?")
        edited = await checkpointer.save(state, THREAD)
        meta = await checkpointer.get_metadata(THREAD, edited)
        assert meta is not None
        equal = await fresh.load(THREAD) == state
        grown = (await checkpointer.get_storage_stats(THREAD))["compressed_size"] - stored
        out.write(
            f"Edited message #3 and saved: a {'full' if meta.is_full else 'delta'} checkpoint, "
            f"storage grew by {grown} bytes (only the edited message); reloads equal={equal}\n"
        )

        keep = await checkpointer.list_checkpoints(THREAD, limit=5)
        states = {cid: await fresh.load(THREAD, cid) for cid in keep}
        deleted = await checkpointer.prune(THREAD, keep_last=5)
        intact = all([await fresh.load(THREAD, cid) == s for cid, s in states.items()])
        after = await checkpointer.get_storage_stats(THREAD)
        out.write(
            f"prune(keep_last=5): deleted {deleted}, the 5 kept still load equal={intact}; "
            f"{after['compressed_size']:,} bytes left\n"
        )

    out.write(f"Registry providers: {', '.join(list_checkpointers())}\n")
    with tempfile.TemporaryDirectory() as folder:
        async with get_checkpointer(f"file:{folder}") as files:  # aclose() on exit
            await files.save(state, "t")
            out.write(
                f"get_checkpointer('file:<tmp>') -> {type(files).__name__}, round trip "
                f"equal={await files.load('t') == state}\n"
            )
