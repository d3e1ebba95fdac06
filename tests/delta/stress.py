"""Random interleavings of writes to one thread, run by the delta concurrency tests.

:func:`random_writes` is what each concurrent writer (a thread or a process) runs; the
states it saved come back keyed by the ``"saved"`` tag of their metadata, so that every
checkpoint left afterwards can be compared with exactly what was saved under it.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from tulip_memory.delta import DeltaCheckpointer
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState

THREAD = "stress"
SHARED_IDS = [f"cp{n}" for n in range(8)]  # ids every writer re-saves and deletes


async def random_writes(checkpointer: DeltaCheckpointer, writer: int, count: int) -> dict[str, Any]:
    """``count`` random saves, re-saves, deletes, thread deletes and prunes of THREAD."""
    rng = random.Random(writer)
    messages = [Message(Role.SYSTEM, f"writer {writer}")]
    saved: dict[str, Any] = {}
    for step in range(count):
        roll = rng.random()
        if roll < 0.80:
            change = rng.random()
            if change < 0.7 or len(messages) < 3:
                messages.append(Message(Role.USER, f"w{writer} s{step} " + "tulip " * 20))
            elif change < 0.85:
                at = rng.randrange(1, len(messages))
                messages[at] = Message(Role.ASSISTANT, f"edited by w{writer} at s{step}")
            else:
                messages.pop()
            checkpoint_id = rng.choice(SHARED_IDS) if roll < 0.45 else f"w{writer}-{step}"
            tag = f"{writer}-{step}"
            state = AgentState(
                messages=list(messages), metadata={"saved": tag, "id": checkpoint_id}
            )
            await checkpointer.save(state, THREAD, checkpoint_id)
            saved[tag] = state.to_checkpoint()
        elif roll < 0.92:
            await checkpointer.delete(THREAD, rng.choice(SHARED_IDS))
        elif roll < 0.95:
            await checkpointer.delete(THREAD)
        else:
            await checkpointer.prune(THREAD, keep_last=rng.randrange(2, 8))
    return saved


async def check_every_checkpoint(checkpointer: DeltaCheckpointer, saved: dict[str, Any]) -> int:
    """Load every listed checkpoint and compare it with what was saved under it."""
    listed = await checkpointer.list_checkpoints(THREAD, limit=10_000)
    for checkpoint_id in listed:
        state = await checkpointer.load(THREAD, checkpoint_id)
        assert state is not None, checkpoint_id
        assert state.metadata["id"] == checkpoint_id
        assert state == AgentState.from_checkpoint(saved[state.metadata["saved"]]), checkpoint_id
    # And the thread still takes saves.
    after = AgentState(messages=[Message(Role.USER, "after")], metadata={})
    await checkpointer.save(after, THREAD, "after")
    assert await checkpointer.load(THREAD) == after
    return len(listed)


PROCESS_SCRIPT = """
import asyncio, json, sys, time, django
django.setup()
from tests.delta.stress import random_writes
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
alias, writer, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
checkpointer = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="stress"), max_chain_depth=3)
started = time.perf_counter()
saved = asyncio.run(random_writes(checkpointer, writer, count))
with open(out, "w") as handle:
    json.dump({"saved": saved, "seconds": time.perf_counter() - started}, handle)
"""


def report(label: str, operations: int, seconds: float) -> None:
    """Print the throughput (shown with ``pytest -s``; quoted in reports)."""
    print(
        f"{label}: {operations} operations in {seconds:.2f} s = {operations / seconds:.0f} ops/s",
        file=sys.stderr,
    )
