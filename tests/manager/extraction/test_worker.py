"""The Celery mode with REAL worker processes (``celery -A example_project worker``, two of
them, prefork with one child each) on this session's Redis queue."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.core.management import CommandError, call_command
from django.db.models import Q
from django.db.models.functions import Now

from tests.manager.celery_setup import Workers, drop_waiting_messages
from tests.manager.extractors import read_log
from tulip_memory.manager import LLMMemoryManager
from tulip_memory.manager.extraction.queue import send_run_task
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob, ExtractionQueue
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _workers_quiet_before_flush(transactional_db, celery_env):
    """After each test, let the workers go quiet before the flush between tests (TRUNCATE):
    a worker's transaction running into it is a deadlock that fails the flush and leaves
    this test's rows to the next test.

    The messages no worker took yet are dropped (duplicates a test sent, follow-ups); then
    no lease may be held and no follow-up booked (``recheck_at``) for one second in a row
    — a claim in progress is invisible until it commits — and the tables are emptied here,
    retried on a deadlock, before pytest-django's own flush.
    """
    yield
    drop_waiting_messages(celery_env)
    deadline = time.monotonic() + 60
    quiet_since = None
    while True:
        with tenant_atomic("acme"):
            busy = list(
                ExtractionQueue.objects.filter(
                    Q(lease_owner__gt="") | Q(recheck_at__gt=Now() - timedelta(seconds=0.5))
                ).values_list("namespace", "lease_owner", "recheck_at")
            )
        now = time.monotonic()
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= 1.0:
            break
        if now > deadline:
            # Fail here rather than flush under a running worker (which would leave this
            # test's rows, or a deadlock, to the next test).
            pytest.fail(f"workers still busy 60 s after the test: {busy}")
        time.sleep(0.1)
    for attempt in range(5):
        try:
            call_command(
                "flush", database="default", interactive=False, verbosity=0, reset_sequences=False
            )
            return
        except CommandError:
            if attempt == 4:
                raise
            time.sleep(0.5)


def _manager() -> LLMMemoryManager:
    return LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "shared"), extract_mode="celery"
    )


async def _end(manager: LLMMemoryManager, namespace: tuple[str, ...], text: str) -> float:
    state = AgentState(messages=[Message(Role.USER, text)])
    with manager.scoped(namespace):
        started = time.perf_counter()
        await manager.on_session_end(state)
        return time.perf_counter() - started


def _job_rows(tenant: str) -> list[tuple[str, int, str, int, str]]:
    with tenant_atomic(tenant):
        return list(
            ExtractionJob.objects.order_by("queue__namespace", "sequence").values_list(
                "queue__namespace", "sequence", "state", "attempts", "worker"
            )
        )


async def test_200_jobs_over_10_namespaces_keep_order_and_lose_nothing(workers, celery_settings):
    manager = _manager()
    labels = [f"order{n}" for n in range(10)]
    for number in range(20):
        for label in labels:
            await _end(manager, ("acme", label), f"{label} {number}")
    # Duplicated and reordered messages: they must change nothing.
    queue_ids = await sync_to_async(_queue_ids)("acme")
    for queue_id in random.Random(7).choices(queue_ids, k=40):
        send_run_task("acme", queue_id)
    async with asyncio.timeout(90):
        await manager.drain()
    assert manager.pending_extractions == 0
    pids = set()
    for label in labels:
        lines = [line.split() for line in read_log(label)]
        assert [int(number) for number, _pid in lines] == list(range(20)), label
        pids.update(int(pid) for _number, pid in lines)
    assert os.getpid() not in pids  # no extraction ran in the caller
    rows = await sync_to_async(_job_rows)("acme")
    assert len(rows) == 200 and {state for _, _, state, _, _ in rows} == {"done"}
    # Each job row names the worker process that ran its extraction (which of the two
    # workers took which namespace is Celery's choice, not asserted: on two shared cores
    # one of them may take them all).
    assert {int(worker.split(":")[1]) for *_, worker in rows} == pids
    # The workers saved through PgMemory: the last job of each namespace won.
    store = PgMemory()
    for label in labels:
        saved = await store.get(("acme", label, "project"), "last_job")
        assert saved["content"] == f"{label} job 19"


def _queue_ids(tenant: str) -> list[int]:
    with tenant_atomic(tenant):
        return list(ExtractionQueue.objects.values_list("pk", flat=True))


async def test_sigkilled_worker_loses_nothing(workers, celery_settings):
    manager = _manager()
    await _end(manager, ("acme", "kill"), "kill 0 doomed")
    await _end(manager, ("acme", "kill"), "kill 1")
    deadline = time.monotonic() + 30
    while not any(line.startswith("start 0") for line in read_log("kill")):
        assert time.monotonic() < deadline, workers.logs()
        await asyncio.sleep(0.05)
    victim = int(read_log("kill")[0].split()[2])
    os.kill(victim, signal.SIGKILL)  # the process running the job, mid-job
    async with asyncio.timeout(60):
        await manager.drain()
    lines = read_log("kill")
    assert lines[0] == f"start 0 {victim}"
    assert [line.split()[0] for line in lines[1:]] == ["start", "0", "1"]
    rows = await sync_to_async(_job_rows)("acme")
    assert [(seq, state, attempts) for _, seq, state, attempts, _ in rows] == [
        (1, "done", 2),
        (2, "done", 1),
    ]


async def test_failing_job_is_failed_after_max_attempts_and_unblocks_its_namespace(
    workers, celery_settings
):
    manager = _manager()
    await _end(manager, ("acme", "poison"), "poison 0 fail")
    await _end(manager, ("acme", "poison"), "poison 1")
    async with asyncio.timeout(60):
        await manager.drain()
    assert [line.split()[0] for line in read_log("poison")] == ["fail", "fail", "fail", "1"]
    rows = await sync_to_async(_job_rows)("acme")
    assert [(seq, state, attempts) for _, seq, state, attempts, _ in rows] == [
        (1, "failed", 3),
        (2, "done", 1),
    ]


async def test_drain_resends_the_task_of_a_job_whose_message_was_lost(
    workers, celery_settings, settings
):
    manager = _manager()
    # The message goes to a queue no worker reads: for the workers it is lost.
    settings.TULIP_MEMORY = {
        **celery_settings,
        "CELERY_QUEUE": f"{celery_settings['CELERY_QUEUE']}_local",
    }
    await _end(manager, ("acme", "lost"), "lost 0")
    settings.TULIP_MEMORY = celery_settings
    async with asyncio.timeout(30):
        await manager.drain()  # re-sends the task of the idle namespace to the real queue
    assert [line.split()[0] for line in read_log("lost")] == ["0"]


async def test_a_job_longer_than_the_lease_is_not_taken_over_while_its_worker_lives(
    workers, celery_settings
):
    manager = _manager()
    await _end(manager, ("acme", "long"), "long 0 slow")  # 3 s, the lease is 2 s
    deadline = time.monotonic() + 30
    while not read_log("long"):
        assert time.monotonic() < deadline, workers.logs()
        await asyncio.sleep(0.05)
    queue_ids = await sync_to_async(_queue_ids)("acme")
    for _ in range(3):  # the other worker gets messages for this namespace meanwhile
        send_run_task("acme", queue_ids[0])
        await asyncio.sleep(0.8)
    async with asyncio.timeout(30):
        await manager.drain()
    assert [line.split()[0] for line in read_log("long")] == ["start", "0"]
    rows = await sync_to_async(_job_rows)("acme")
    assert [(state, attempts) for _, _, state, attempts, _ in rows] == [("done", 1)]


async def test_a_connection_ended_mid_job_uses_no_attempt(workers, celery_settings):
    # The server ends the worker's session inside a transaction of the job, on each of its
    # first three runs (as many as EXTRACTION_MAX_ATTEMPTS): the database's failure, not
    # the job's. Each run gives the attempt back and the task retries itself; the job is
    # done at its first counted attempt, in order, once in effect.
    manager = _manager()
    await _end(manager, ("acme", "severed"), "severed 0 cut")
    await _end(manager, ("acme", "severed"), "severed 1")
    async with asyncio.timeout(60):
        await manager.drain()
    assert [line.split()[0] for line in read_log("severed")] == ["cut", "cut", "cut", "0", "1"]
    rows = await sync_to_async(_job_rows)("acme")
    assert [(seq, state, attempts) for _, seq, state, attempts, _ in rows] == [
        (1, "done", 1),
        (2, "done", 1),
    ]
    assert "cut by a database error" in workers.logs()
    versions = await LLMMemoryManager(PgMemory()).history(
        "project", "last_job", namespace=("acme", "severed")
    )
    assert [version.content for version in versions] == ["severed job 0", "severed job 1"]


def test_on_the_tasks_last_retry_a_database_error_counts(workers, celery_settings, settings):
    # Bounded: the message of a task at its last retry (Celery's retries=10 = max_retries)
    # charges the attempt of a job whose run meets a database error, and is not retried.
    from tulip_memory.tasks import run_extraction_queue

    queue = celery_settings["CELERY_QUEUE"]
    settings.TULIP_MEMORY = {**celery_settings, "CELERY_QUEUE": f"{queue}_local"}  # no worker
    runner = _manager()._celery
    runner.enqueue(("acme", "charged"), [Message(Role.USER, "charged 0 cutever")])
    (queue_id,) = _queue_ids("acme")
    run_extraction_queue.apply_async(("acme", queue_id), queue=queue, retries=10)
    deadline = time.monotonic() + 30
    while not any(attempts for _, _, _, attempts, _ in _job_rows("acme")):
        assert time.monotonic() < deadline, workers.logs()
        time.sleep(0.05)
    workers.wait_idle()  # nothing scheduled: no retry after the last one
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get()
        assert ExtractionQueue.objects.get().lease_owner == ""
    assert (job.state, job.attempts) == ("pending", 1)
    assert job.error.startswith("OperationalError: ") and job.run_after is not None
    assert [line.split()[0] for line in read_log("charged")] == ["cut"]


def _own_queue_workers(celery_env: str, suffix: str, tmp_path, **env: str) -> Workers:
    """One worker on a queue of its own (``<session queue>_<suffix>``), with ``env``."""
    return Workers(1, tmp_path, env={"TULIP_TEST_CELERY_QUEUE": f"{celery_env}_{suffix}", **env})


def test_a_worker_whose_extractor_setting_does_not_import_refuses_to_start(
    celery_env, celery_settings, settings, tmp_path
):
    # Celery runs Django's checks as a worker starts but ignores what they find: without
    # the worker's own check this one would start and fail every job, attempts and all.
    queue = f"{celery_env}_badextractor"
    settings.TULIP_MEMORY = {**celery_settings, "CELERY_QUEUE": queue}
    runner = _manager()._celery
    for number in range(3):
        runner.enqueue(("acme", "badextractor"), [Message(Role.USER, f"badextractor {number}")])
    broken = _own_queue_workers(
        celery_env,
        "badextractor",
        tmp_path,
        TULIP_TEST_EXTRACTOR="tests.manager.no_such_module.extract",
    )
    try:
        with pytest.raises(RuntimeError, match="did not start"):
            broken.start()
        (process,) = broken.processes
        assert process.wait(timeout=30) == 1
        stderr = (tmp_path / "worker0.stderr").read_text()
        assert "this Celery worker refuses to start" in stderr
        assert "tulip_memory.E041: TULIP_MEMORY['EXTRACTOR'] cannot be imported" in stderr
        assert "No module named 'tests.manager.no_such_module'" in stderr
        time.sleep(1.0)  # had it started, it would have run (and failed) them by now
        rows = _job_rows("acme")
        assert [(state, attempts) for _, _, state, attempts, _ in rows] == [("pending", 0)] * 3
        assert read_log("badextractor") == []
    finally:
        broken.stop()
        drop_waiting_messages(queue)


def test_a_manager_that_cannot_be_built_on_a_worker_leaves_its_jobs_pending(
    celery_env, celery_settings, settings, tmp_path
):
    # Settings that pass the checks, but the worker cannot build its manager (the store
    # refuses an option's value): every task fails loudly, no job uses an attempt or a
    # lease.
    queue = f"{celery_env}_badoptions"
    settings.TULIP_MEMORY = {**celery_settings, "CELERY_QUEUE": queue}
    worker = _own_queue_workers(
        celery_env, "badoptions", tmp_path, TULIP_TEST_STORE_OPTIONS='{"dim": "wide"}'
    )
    worker.start()
    try:
        runner = _manager()._celery
        for label in ("badoptions", "badoptions", "badoptions2"):
            runner.enqueue(("acme", label), [Message(Role.USER, f"{label} 0")])
        deadline = time.monotonic() + 30
        while worker.logs().count("raised unexpected: ConfigurationError") < 3:
            assert time.monotonic() < deadline, worker.logs()
            time.sleep(0.1)
        logs = worker.logs()
        assert "ERROR" in logs and "cannot build its memory manager from TULIP_MEMORY" in logs
        assert "ValueError: dim must be an int >= 1, got 'wide'" in logs
        rows = _job_rows("acme")
        assert [(state, attempts) for _, _, state, attempts, _ in rows] == [("pending", 0)] * 3
        with tenant_atomic("acme"):
            assert set(ExtractionQueue.objects.values_list("lease_owner", flat=True)) == {""}
    finally:
        worker.stop()
        drop_waiting_messages(queue)
