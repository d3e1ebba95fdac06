"""Concurrent writers of one thread: every checkpoint left loads to what was saved under it.

Writers run random saves, re-saves of shared ids, deletes of one id, deletes of the
thread and prunes (see ``stress.py``): as threads each running its own event loop over
one checkpointer or over two checkpointers sharing one storage, and as processes over the
ORM storage on PostgreSQL and MariaDB.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.delta.stress import PROCESS_SCRIPT, check_every_checkpoint, random_writes, report
from tests.processes import run_in_threads, run_python
from tulip_memory.delta import DeltaCheckpointer, InMemoryDeltaStorage, ORMDeltaStorage
from tulip_memory.delta.keyed_locks import WRITER_LOCKS

OPERATIONS = 200


@pytest.mark.parametrize("shared", ["one-checkpointer", "one-storage"])
def test_threads_with_their_own_event_loops(shared):
    storage = InMemoryDeltaStorage()
    first = DeltaCheckpointer(storage, max_chain_depth=3)
    second = (
        first if shared == "one-checkpointer" else DeltaCheckpointer(storage, max_chain_depth=3)
    )
    saved: dict = {}

    def writer(number: int) -> None:
        checkpointer = (first, second)[number]
        saved.update(asyncio.run(random_writes(checkpointer, number, OPERATIONS)))

    started = time.perf_counter()
    assert run_in_threads(writer, 2) == []
    report(f"in-memory, 2 threads ({shared})", 2 * OPERATIONS, time.perf_counter() - started)
    asyncio.run(check_every_checkpoint(DeltaCheckpointer(storage), saved))
    assert len(WRITER_LOCKS) == 0  # no lock outlives its users


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("alias", ["default", "mysql"], ids=["postgresql", "mysql"])
async def test_processes_over_the_orm_storage(alias, tmp_path):
    outputs = [tmp_path / f"writer-{n}.json" for n in range(2)]
    runs = await asyncio.gather(
        *(
            asyncio.to_thread(run_python, PROCESS_SCRIPT, alias, str(n), str(OPERATIONS), str(out))
            for n, out in enumerate(outputs)
        )
    )
    assert [run.stderr[-3000:] for run in runs if run.returncode] == []
    results = [json.loads(out.read_text()) for out in outputs]
    saved = {tag: state for result in results for tag, state in result["saved"].items()}
    seconds = max(result["seconds"] for result in results)
    report(f"ORM {alias}, 2 processes", 2 * OPERATIONS, seconds)
    checkpointer = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="stress"))
    await check_every_checkpoint(checkpointer, saved)
