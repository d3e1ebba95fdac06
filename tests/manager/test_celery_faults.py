"""Faults a production deployment meets, drilled against the real services.

* PostgreSQL restarted (the embedded server stopped and started) while the session's two
  real Celery workers run extraction jobs: every job completes after the reconnect, in
  order per namespace, none twice in effect.
* The broker unreachable at ``on_session_end``: the caller returns within 1 s, the job is
  recorded, and it runs once the broker is back with nobody calling ``drain()`` — the
  periodic sweep, sent by a real ``celery beat``, re-sends its message.
* A whole worker (main process and children) SIGKILLed while it holds a lease: another
  worker gets the namespace from the sweep within lease + sweep interval.

The last two run their own worker(s) and beat on a queue of their own, so that the
session's two workers (on the session queue) neither help nor get killed.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest
from asgiref.sync import async_to_sync
from celery import Celery, current_app
from django.db import connections

from tests.manager.celery_setup import Beat, Workers
from tests.manager.extractors import read_log
from tests.manager.faults import closed_port, embedded_postgres_server, restart_embedded_postgres
from tests.manager.test_celery_workers import _workers_quiet_before_flush  # noqa: F401
from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob, ExtractionQueue
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 2.0  # EXTRACTION_LEASE_SECONDS of tests/manager/celery_setup.py
SWEEP_EVERY = 1.0  # the beat interval of the sweep drills


def _manager() -> LLMMemoryManager:
    return LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "shared"), extract_mode="celery"
    )


def _end(manager: LLMMemoryManager, namespace: tuple[str, ...], text: str) -> float:
    """``on_session_end`` from sync code (its database work runs on this thread); seconds."""
    state = AgentState(messages=[Message(Role.USER, text)])
    with manager.scoped(namespace):
        started = time.perf_counter()
        async_to_sync(manager.on_session_end)(state)
        return time.perf_counter() - started


def _jobs(tenant: str) -> list[tuple[str, int, str, int]]:
    with tenant_atomic(tenant):
        return list(
            ExtractionJob.objects.order_by("queue__namespace", "sequence").values_list(
                "queue__namespace", "sequence", "state", "attempts"
            )
        )


def _history(label: str) -> list[str]:
    """The contents of every version of the ``last_job`` memory of ``label``, oldest first."""
    manager = LLMMemoryManager(PgMemory(), namespace_prefix=("acme", label))
    versions = async_to_sync(manager.history)(MemoryType.PROJECT, "last_job")
    return [version.content for version in versions]


def _close_connections_of_every_thread() -> None:
    """Drop this process's connections that died with the server: this thread's, and those
    of the thread where the async tests' ORM calls run (asgiref's single-thread executor),
    which the next async test of the session would otherwise find broken."""
    from asgiref.sync import SyncToAsync

    connections.close_all()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


def test_postgresql_restart_while_two_workers_run_jobs(workers, celery_settings):
    if embedded_postgres_server() is None:
        pytest.skip("DATABASE_URL names an outside server: this drill restarts the embedded one")
    manager = _manager()
    labels = [f"restart{n}" for n in range(4)]
    jobs = 12
    for number in range(jobs):
        for label in labels:
            _end(manager, ("acme", label), f"{label} {number} nap")  # 0.15 s each

    def done_so_far() -> int:
        return sum(len(read_log(label)) for label in labels)

    deadline = time.monotonic() + 60
    while done_so_far() < 6:
        assert time.monotonic() < deadline, workers.logs()
        time.sleep(0.02)
    started = time.monotonic()
    restart_embedded_postgres(down_for=LEASE + 1.0)  # down longer than a lease
    back = time.monotonic()
    before_restart_done = done_so_far()
    _close_connections_of_every_thread()

    async def drain() -> None:
        import asyncio

        async with asyncio.timeout(120):
            await manager.drain()

    async_to_sync(drain)()
    finished = time.monotonic()
    print(
        f"\nrestart drill: {before_restart_done}/{jobs * len(labels)} jobs logged when the "
        f"server was back ({back - started:.1f} s after the stop began); all done "
        f"{finished - back:.1f} s after it was back"
    )
    assert before_restart_done < jobs * len(labels)  # the restart hit the run mid-way
    rows = _jobs("acme")
    assert len(rows) == jobs * len(labels)
    assert {state for _, _, state, _ in rows} == {"done"}, rows
    for label in labels:
        numbers = [int(line.split()[0]) for line in read_log(label)]
        # In order: a job re-run after the outage (its "done" was not recorded) repeats in
        # place; nothing runs before a job of a lower number.
        assert numbers == sorted(numbers) and set(numbers) == set(range(jobs)), (label, numbers)
        # None twice in effect: each job's memory is one version of the history, in order.
        assert _history(label) == [f"{label} job {n}" for n in range(jobs)], label
    reruns = [(ns, seq, attempts) for ns, seq, _, attempts in rows if attempts > 1]
    print(f"jobs run more than once (attempts > 1): {reruns}")
