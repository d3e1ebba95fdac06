"""Extractors that Celery workers of the tests run (named by ``TULIP_MEMORY["EXTRACTOR"]``).

:func:`logging_extractor` appends one line per job to ``<log dir>/<namespace label>.log``
(``TULIP_TEST_EXTRACTION_LOG``), so a test can check order and loss across processes.
The last user message says what to do: ``"<label> <number>"`` logs and returns a memory;
with ``slow`` it first logs ``start <number> <pid>`` and sleeps (``TULIP_TEST_SLOW_SECONDS``,
3 s); with ``doomed`` it logs ``start <number> <pid>`` too and, the first time only, sleeps
two minutes (a job to be killed mid-run: the test has all the time it needs); with ``nap``
it sleeps 0.15 s first (jobs that take a while, no extra log line);
with ``fail`` it raises; with ``drop`` (the first time only: it logs ``drop <number>
<pid>``) the database ends this process's connection first, as a server restart does,
so that the job's save fails on it; with ``cut`` (the first three times: as many as the
tests' ``EXTRACTION_MAX_ATTEMPTS``; ``cutever``: every time) the database ends it inside
a transaction of the extractor (which logs ``cut <number> <pid>`` and raises the
``OperationalError``), as when an administrator or a failover ends a busy session; with
``steal`` (first time only: it logs ``steal
<number> <pid>``) a worker called ``thief`` takes the namespace's lease (of tenant
``acme``) meanwhile, as if this worker's had expired during an outage.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tulip_memory.manager import Memory, MemoryType
from tulip_memory.messages import Message


def _append(label: str, line: str) -> None:
    path = Path(os.environ["TULIP_TEST_EXTRACTION_LOG"]) / f"{label}.log"
    with path.open("a") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def read_log(label: str) -> list[str]:
    path = Path(os.environ["TULIP_TEST_EXTRACTION_LOG"]) / f"{label}.log"
    return path.read_text().splitlines() if path.exists() else []


def _drop_own_connection() -> None:
    from django.db import DatabaseError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    except DatabaseError:
        pass  # the server ended the session: what a restart does to every connection


def _cut_inside_a_transaction() -> None:
    from django.db import connection

    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("acme"), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


def _steal_lease(label: str) -> None:
    from django.db.models.functions import Now

    from tulip_memory.models import ExtractionQueue
    from tulip_memory.models.extraction import db_now_plus
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("acme"):
        ExtractionQueue.objects.filter(namespace=f"acme/{label}").update(
            lease_owner="thief", lease_expires_at=db_now_plus(60), recheck_at=Now()
        )


def _first_time(label: str, flag: str, number: str) -> bool:
    return not any(line.startswith(f"{flag} {number} ") for line in read_log(label))


async def logging_extractor(messages: list[Message]) -> list[Memory]:
    label, number, *flags = messages[-1].content.split()
    if "steal" in flags and _first_time(label, "steal", number):
        _append(label, f"steal {number} {os.getpid()}")
        from asgiref.sync import sync_to_async

        await sync_to_async(_steal_lease)(label)
    if "drop" in flags and _first_time(label, "drop", number):
        _append(label, f"drop {number} {os.getpid()}")
        from asgiref.sync import sync_to_async

        await sync_to_async(_drop_own_connection)()
    cuts = sum(line.startswith(f"cut {number} ") for line in read_log(label))
    if "cutever" in flags or ("cut" in flags and cuts < 3):
        _append(label, f"cut {number} {os.getpid()}")
        from asgiref.sync import sync_to_async

        await sync_to_async(_cut_inside_a_transaction)()
    if "slow" in flags:
        _append(label, f"start {number} {os.getpid()}")
        await asyncio.sleep(float(os.environ.get("TULIP_TEST_SLOW_SECONDS", "3")))
    if "doomed" in flags:
        first = _first_time(label, "start", number)
        _append(label, f"start {number} {os.getpid()}")
        if first:
            await asyncio.sleep(120)  # until the test kills this process
    if "nap" in flags:
        await asyncio.sleep(0.15)
    if "fail" in flags:
        _append(label, f"fail {number} {os.getpid()}")
        raise RuntimeError(f"job {number} always fails")
    _append(label, f"{number} {os.getpid()}")
    return [Memory(MemoryType.PROJECT, "last_job", f"{label} job {number}")]
