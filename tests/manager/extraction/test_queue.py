"""The Celery mode's job rows, run in this process: enqueue on commit, RLS, leases, retries.

The worker code (``run_queue``) is called directly here to check its bookkeeping step by
step; tests/manager/extraction/test_worker.py runs it in real worker processes.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction

from tests.manager.conftest import manager_events
from tests.manager.extractors import read_log
from tulip_memory.manager import LLMMemoryManager
from tulip_memory.manager.extraction.worker import run_queue
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.models import ExtractionJob, ExtractionQueue, JobState
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

# The error of an attempt whose extractor raised RuntimeError (tests.manager.extractors).
EXTRACTION_FAILED = "RuntimeError: the extraction failed; its message is logged at DEBUG level"


@pytest.fixture
def celery_settings(celery_settings, settings):
    """A queue no worker consumes: this process runs the worker code itself."""
    settings.TULIP_MEMORY = {
        **celery_settings,
        "CELERY_QUEUE": f"{celery_settings['CELERY_QUEUE']}_local",
    }
    return settings.TULIP_MEMORY


def _manager() -> LLMMemoryManager:
    return LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "shared"), extract_mode="celery"
    )


def _jobs(tenant: str) -> list[tuple[int, str, int, str]]:
    with tenant_atomic(tenant):
        return list(
            ExtractionJob.objects.order_by("queue_id", "sequence").values_list(
                "sequence", "state", "attempts", "error"
            )
        )


async def _end(manager: LLMMemoryManager, namespace: tuple[str, ...], text: str) -> None:
    with manager.scoped(namespace):
        block = Message(Role.SYSTEM, "old memories", metadata={"tulip_memory_block": True})
        await manager.on_session_end(AgentState(messages=[block, Message(Role.USER, text)]))


async def test_session_end_records_a_job_and_runs_nothing(celery_settings):
    manager = _manager()
    await _end(manager, ("acme", "q1"), "q1 0")
    await _end(manager, ("acme", "q1"), "q1 1")
    await _end(manager, ("acme", "q2"), "q2 0")
    assert manager.pending_extractions == 3
    assert read_log("q1") == []
    jobs = await sync_to_async(_jobs)("acme")
    assert [(seq, state, attempts) for seq, state, attempts, _ in jobs] == [
        (1, "pending", 0), (2, "pending", 0), (1, "pending", 0),
    ]  # fmt: skip


def test_payload_is_the_conversation_without_the_memory_block(celery_settings):
    manager = _manager()
    asyncio.run(_end(manager, ("acme", "q3"), "q3 0"))
    with tenant_atomic("acme"):
        (payload,) = ExtractionJob.objects.values_list("payload", flat=True)
        (queue,) = ExtractionQueue.objects.all()
    assert payload == {"messages": [{"role": "user", "content": "q3 0"}]}
    assert queue.namespace_tuple == ("acme", "q3") and queue.tenant == "acme"


def test_a_nul_character_anywhere_in_the_conversation_is_dropped_not_the_session(
    celery_settings,
):
    """PostgreSQL's JSON cannot hold NUL: without it the job could not be recorded at all.
    Every mode extracts from the same text without it (tests/manager/test_manager.py)."""
    manager = _manager()
    call = ToolCall(id="c1", name="look\x00up", arguments={"q\x00": "Ber\x00lin"})
    state = AgentState(
        messages=[
            Message(Role.USER, "I live in Ber\x00lin.", metadata={"note": "a\x00"}),
            Message(Role.ASSISTANT, "", tool_calls=[call]),
        ]
    )
    with manager.scoped(("acme", "nul")):
        asyncio.run(manager.on_session_end(state))
    with tenant_atomic("acme"):
        (payload,) = ExtractionJob.objects.values_list("payload", flat=True)
    assert payload["messages"][0] == {
        "role": "user",
        "content": "I live in Berlin.",
        "metadata": {"note": "a"},
    }
    assert payload["messages"][1]["tool_calls"][0]["name"] == "lookup"
    assert payload["messages"][1]["tool_calls"][0]["arguments"] == {"q": "Berlin"}


def test_job_is_part_of_the_callers_transaction(celery_settings):
    runner = _manager()._celery
    with pytest.raises(RuntimeError), transaction.atomic():
        runner.enqueue(("acme", "q4"), [Message(Role.USER, "q4 0")])
        raise RuntimeError("the caller's transaction rolls back")
    assert runner.pending == 0
    with tenant_atomic("acme"):
        assert not ExtractionJob.objects.exists()
    with transaction.atomic():
        runner.enqueue(("acme", "q4"), [Message(Role.USER, "q4 1")])
        assert runner.pending == 0  # sent on commit, not before
    assert runner.pending == 1


def test_job_rows_are_under_row_level_security(celery_settings):
    runner = _manager()._celery
    runner.enqueue(("acme", "q5"), [Message(Role.USER, "q5 0")])
    runner.enqueue(("globex", "q5"), [Message(Role.USER, "q5 0")])
    with tenant_atomic("acme"):
        assert set(ExtractionJob.objects.values_list("tenant", flat=True)) == {"acme"}
        assert ExtractionQueue.objects.count() == 1
    with transaction.atomic():
        assert ExtractionJob.objects.count() == 0  # no tenant: nothing visible


def test_worker_runs_a_namespace_in_order_and_records_progress(celery_settings):
    runner = _manager()._celery
    for number in range(5):
        runner.enqueue(("acme", "q6"), [Message(Role.USER, f"q6 {number}")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    outcome = run_queue("acme", queue_id, owner="test-worker")
    assert (outcome.done, outcome.failed, outcome.retry_in) == (5, 0, None)
    assert [line.split()[0] for line in read_log("q6")] == ["0", "1", "2", "3", "4"]
    assert [(s, st, a) for s, st, a, _ in _jobs("acme")] == [(n, "done", 1) for n in range(1, 6)]
    with tenant_atomic("acme"):
        queue = ExtractionQueue.objects.get()
    assert queue.lease_owner == "" and queue.last_sequence == 5
    saved = async_to_sync(PgMemory().get)(("acme", "q6", "project"), "last_job")
    assert saved["content"] == "q6 job 4"  # saved through the store TULIP_MEMORY names
    # A duplicate message changes nothing.
    assert run_queue("acme", queue_id).done == 0
    assert len(read_log("q6")) == 5


@pytest.mark.parametrize("purge_hours", [None, 0])
def test_a_done_job_records_the_memory_operations_it_applied(
    celery_settings, settings, purge_hours
):
    settings.TULIP_MEMORY = {**celery_settings, "JOB_PAYLOAD_PURGE_AFTER_HOURS": purge_hours}
    _manager()._celery.enqueue(("acme", "q7"), [Message(Role.USER, "q7 1")])
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get()
        assert job.applied_operations() is None  # pending: nothing done yet
    assert run_queue("acme", job.queue_id).done == 1
    with tenant_atomic("acme"):
        job.refresh_from_db()
    assert job.applied_operations() == [("SAVE", "project", "last_job")]
    # The conversation stays until purged; what the job did stays with it, or alone.
    expected = {} if purge_hours == 0 else {"messages": [Message(Role.USER, "q7 1").to_dict()]}
    assert job.payload == {**expected, "applied": [["SAVE", "project", "last_job"]]}
    with tenant_atomic("acme"):
        assert ExtractionJob.objects.with_payload().count() == (purge_hours is None)


def test_a_held_lease_books_one_recheck_and_a_dead_workers_lease_expires(celery_settings):
    runner = _manager()._celery
    runner.enqueue(("acme", "q7"), [Message(Role.USER, "q7 0")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
        assert ExtractionQueue.objects.claim(queue_id, "dead-worker", 1.0)
    first = run_queue("acme", queue_id)
    assert first.done == 0 and 0 < first.retry_in <= 1.0
    assert run_queue("acme", queue_id).retry_in is None  # one recheck per lease period
    import time

    time.sleep(first.retry_in + 0.05)
    assert run_queue("acme", queue_id).done == 1


def test_failing_job_is_retried_then_failed_and_stops_blocking(celery_settings):
    runner = _manager()._celery
    runner.enqueue(("acme", "q8"), [Message(Role.USER, "q8 0 fail")])
    runner.enqueue(("acme", "q8"), [Message(Role.USER, "q8 1")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    import time

    outcomes = []
    while True:
        outcome = run_queue("acme", queue_id)
        outcomes.append(outcome)
        if outcome.retry_in is None:
            break
        assert read_log("q8")[-1].startswith("fail")  # job 1 waits for job 0
        time.sleep(outcome.retry_in)
    assert [line.split()[0] for line in read_log("q8")] == ["fail", "fail", "fail", "1"]
    jobs = _jobs("acme")
    assert jobs[0][:3] == (1, JobState.FAILED, 3)
    assert jobs[0][3] == EXTRACTION_FAILED
    assert jobs[1][:3] == (2, JobState.DONE, 1)
    assert sum(o.retried for o in outcomes) == 2 and sum(o.failed for o in outcomes) == 1


def test_a_failed_jobs_error_event_and_log_never_quote_its_message(
    celery_settings, settings, sent_events, caplog
):
    # An extractor's error may quote the conversation or the model's reply: the job's row,
    # its event and every log record above DEBUG say what failed, in words of ours; the
    # message itself is logged at DEBUG only (erasure cannot reach a log aggregator).
    import logging

    settings.TULIP_MEMORY = {**celery_settings, "EXTRACTION_MAX_ATTEMPTS": 1}
    caplog.set_level(logging.DEBUG, logger="tulip_memory")
    runner = _manager()._celery
    runner.enqueue(("acme", "q21"), [Message(Role.USER, "q21 0 fail")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    assert run_queue("acme", queue_id).failed == 1
    [(_, _, _, error)] = _jobs("acme")
    assert error == EXTRACTION_FAILED
    [failed] = [
        payload for name, payload in manager_events(sent_events) if name.endswith("extract_failed")
    ]
    assert (failed["error"], failed["error_type"], failed["final"]) == (error, "RuntimeError", True)
    quoting = [r for r in caplog.records if "always fails" in logging.Formatter().format(r)]
    assert [r.levelname for r in quoting] == ["DEBUG"]
    assert any(error in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


def test_the_worker_binds_the_queues_tenant_while_it_runs_a_job(celery_settings, monkeypatch):
    # A store or extractor that guards on the bound tenant (PgMemory does) sees the job's.
    from tulip_memory.tenancy import current_tenant

    seen = []
    extract = LLMMemoryManager.extract

    async def extract_noting_the_tenant(self, messages):
        seen.append(current_tenant())
        return await extract(self, messages)

    monkeypatch.setattr(LLMMemoryManager, "extract", extract_noting_the_tenant)
    runner = _manager()._celery
    runner.enqueue(("acme", "q22"), [Message(Role.USER, "q22 0")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    assert run_queue("acme", queue_id).done == 1
    assert seen == ["acme"]


def test_a_queue_whose_namespace_names_another_tenant_fails_and_writes_nothing(
    celery_settings, sent_events
):
    # acme's own role may write any path into its queue row (row-level security checks
    # the tenant column, not the path): the worker must not write into globex for it.
    from tulip_memory.models import MemoryItem

    runner = _manager()._celery
    runner.enqueue(("acme", "users", "victim"), [Message(Role.USER, "q23 0")])
    runner.enqueue(("acme", "users", "victim"), [Message(Role.USER, "q23 1")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
        ExtractionQueue.objects.filter(pk=queue_id).update(namespace="globex/users/victim")
    outcome = run_queue("acme", queue_id)
    assert (outcome.done, outcome.failed, outcome.retry_in) == (0, 2, None)
    refused = (
        "TenantError: the queue's namespace is of tenant 'globex', not of the job's tenant "
        "'acme'; nothing was run"
    )
    assert _jobs("acme") == [(1, "failed", 0, refused), (2, "failed", 0, refused)]
    assert [
        p["error"] for name, p in manager_events(sent_events) if name.endswith("extract_failed")
    ] == [refused] * 2
    assert read_log("q23") == []  # the extractor never ran
    for tenant in ("acme", "globex"):
        with tenant_atomic(tenant):
            assert not MemoryItem.objects.exists()
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get().lease_owner == ""


def test_job_whose_worker_died_on_its_last_attempt_is_failed(celery_settings):
    runner = _manager()._celery
    runner.enqueue(("acme", "q9"), [Message(Role.USER, "q9 0")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
        ExtractionJob.objects.update(state=JobState.RUNNING, attempts=3)
    assert run_queue("acme", queue_id).failed == 1
    (job,) = _jobs("acme")
    assert job[1] == "failed" and job[3].startswith("worker lost during attempt 3")
    assert read_log("q9") == []


async def test_drain_is_bounded_by_asyncio_timeout(celery_settings):
    manager = _manager()
    await _end(manager, ("acme", "q10"), "q10 0")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await manager.drain()
    assert manager.pending_extractions == 1


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
def test_celery_mode_needs_postgresql(celery_settings):
    from tulip_memory.exceptions import ConfigurationError
    from tulip_memory.manager.extraction.queue import CeleryExtractions

    runner = CeleryExtractions(using="mysql")
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        runner.enqueue(("acme", "q11"), [Message(Role.USER, "q11 0")])
    assert runner.pending == 0
    assert not ExtractionJob.objects.using("mysql").exists()


async def test_pending_jobs_seen_finished_are_forgotten_without_drain(celery_settings):
    manager = _manager()
    runner = manager._celery
    runner.refresh_every = 3
    await _end(manager, ("acme", "q12"), "q12 0")
    await _end(manager, ("acme", "q12"), "q12 1")
    queue_id = await sync_to_async(_queue_id)("acme")
    await sync_to_async(run_queue)("acme", queue_id)
    assert manager.pending_extractions == 2
    await _end(manager, ("acme", "q12"), "q12 2")  # the third submission refreshes
    assert manager.pending_extractions == 1


def _queue_id(tenant: str) -> int:
    with tenant_atomic(tenant):
        return ExtractionQueue.objects.get().pk


def test_session_end_from_sync_code_joins_the_callers_transaction(celery_settings):
    manager = _manager()
    state = AgentState(messages=[Message(Role.USER, "q13 0")])
    with pytest.raises(RuntimeError), transaction.atomic(), manager.scoped(("acme", "q13")):
        async_to_sync(manager.on_session_end)(state)
        raise RuntimeError("the view fails after the session ended")
    assert manager.pending_extractions == 0
    with tenant_atomic("acme"):
        assert not ExtractionJob.objects.exists()
    with transaction.atomic(), manager.scoped(("acme", "q13")):
        async_to_sync(manager.on_session_end)(state)
        assert manager.pending_extractions == 0
    assert manager.pending_extractions == 1


def test_job_with_an_unreadable_payload_is_failed_and_stops_blocking(celery_settings):
    # A payload that does not decode to messages must be recorded as a failure like any
    # other error, not escape run_queue and leave the job "running" with no error.
    runner = _manager()._celery
    runner.enqueue(("acme", "q14"), [Message(Role.USER, "q14 0")])
    runner.enqueue(("acme", "q14"), [Message(Role.USER, "q14 1")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
        ExtractionJob.objects.filter(sequence=1).update(payload={"messages": [{"role": "bogus"}]})
    celery_settings_ = dict(celery_settings, EXTRACTION_MAX_ATTEMPTS=1)
    from django.test import override_settings

    with override_settings(TULIP_MEMORY=celery_settings_):
        outcome = run_queue("acme", queue_id)
    assert (outcome.done, outcome.failed) == (1, 1)
    jobs = _jobs("acme")
    assert jobs[0][:3] == (1, JobState.FAILED, 1)
    assert jobs[0][3] == (
        "ValueError: the job's payload does not decode to messages; its message is logged at "
        "DEBUG level"
    )
    assert jobs[1][:3] == (2, JobState.DONE, 1)
    assert [line.split()[0] for line in read_log("q14")] == ["1"]
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get().lease_owner == ""


def test_lease_heartbeat_survives_a_dropped_database_connection(celery_settings):
    # A transient database error in the heartbeat must not stop it for good: the lease
    # would then expire under a live worker and a second worker would run the namespace.
    import time

    from django.db import connections

    from tulip_memory.manager.extraction.worker import _Heartbeat

    runner = _manager()._celery
    runner.enqueue(("acme", "q15"), [Message(Role.USER, "q15 0")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
        assert ExtractionQueue.objects.claim(queue_id, "live-worker", 1.5)
    sessions_sql = (
        "SELECT pid FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid()"
    )
    with connections["default"].cursor() as cursor:
        cursor.execute(sessions_sql)
        before = {pid for (pid,) in cursor.fetchall()}
    with _Heartbeat("acme", queue_id, "live-worker", 1.5) as heartbeat:
        time.sleep(0.8)  # one renewal (every 0.5 s): the heartbeat's connection exists
        with connections["default"].cursor() as cursor:  # a role may end its own sessions
            cursor.execute(sessions_sql)
            new = {pid for (pid,) in cursor.fetchall()} - before
            assert new, "the heartbeat's connection was not found"
            for pid in new:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        time.sleep(2.0)  # past the lease (1.5 s after the last renewal before the drop)
        assert heartbeat._thread.is_alive()
        with tenant_atomic("acme"):
            # Still held by the live worker: nobody else can claim it.
            assert not ExtractionQueue.objects.claim(queue_id, "other-worker", 1.5)


def test_a_task_message_that_cannot_be_sent_never_breaks_the_callers_commit(
    celery_settings, caplog
):
    # The job row is committed with the caller's transaction; a failure to send its task
    # message afterwards (broker down, bad serializer) must not surface as an exception
    # at the caller's commit (on_session_end never raises), and loses nothing: the job
    # stays recorded and drain() re-sends the message of a queue nobody works on.
    from tulip_memory.tasks import run_extraction_queue

    manager = _manager()
    state = AgentState(messages=[Message(Role.USER, "q16 0")])
    run_extraction_queue.serializer = "no-such-serializer"  # the send itself fails
    # Celery caches a task's send options at its first send: clear that cache so the bad
    # serializer applies here, and again after, so that it leaks into no later send.
    run_extraction_queue._exec_options = None
    try:
        with transaction.atomic(), manager.scoped(("acme", "q16")):
            async_to_sync(manager.on_session_end)(state)
    finally:
        del run_extraction_queue.serializer
        run_extraction_queue._exec_options = None
    assert manager.pending_extractions == 1
    assert [(s, st) for s, st, _, _ in _jobs("acme")] == [(1, JobState.PENDING)]
    # One line that says what happened and what happens next, not a traceback.
    [record] = [r for r in caplog.records if "could not be sent" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert "is stored but its Celery message could not be sent" in record.getMessage()
    assert "the sweep re-sends it once the broker answers" in record.getMessage()


def test_celery_mode_refuses_a_namespace_of_another_tenant_than_the_bound_one(
    celery_settings, caplog
):
    # Inline, PgMemory refuses it; queued, the worker would write into that tenant.
    import logging

    from tulip_memory.tenancy import tenant_context

    manager = _manager()
    state = AgentState(messages=[Message(Role.USER, "I live in Oslo.")])
    with (
        caplog.at_level(logging.DEBUG, logger="tulip_memory.manager"),
        tenant_context("globex"),
        manager.scoped(("acme", "planted")),
    ):
        async_to_sync(manager.on_session_end)(state)
    assert manager.pending_extractions == 0
    assert _jobs("acme") == [] and _jobs("globex") == []
    # The error's type and what failed at ERROR; its message (of ours here, but an
    # enqueue's error may quote the conversation) at DEBUG.
    assert any(
        r.levelname == "ERROR" and "TenantError: enqueuing the extraction failed" in r.message
        for r in caplog.records
    )
    said = "namespace[0] is tenant 'acme' but tenant 'globex' is bound"
    assert [r.levelname for r in caplog.records if said in caplog.handler.format(r)] == ["DEBUG"]
    with tenant_context("acme"), manager.scoped(("acme", "own")):
        async_to_sync(manager.on_session_end)(state)
    assert manager.pending_extractions == 1


def test_a_worker_that_lost_its_lease_stops_before_its_next_job(celery_settings, monkeypatch):
    # Worker A is paused past its lease while running job 0 (here: the queue is handed to
    # worker B meanwhile, as B's claim of the expired lease would). A must notice the lost
    # lease before it saves anything and leave both jobs to B: order kept, nothing saved
    # twice.
    import threading
    import time

    from django.db import connections

    monkeypatch.setenv("TULIP_TEST_SLOW_SECONDS", "1.0")
    runner = _manager()._celery
    runner.enqueue(("acme", "q15"), [Message(Role.USER, "q15 0 slow")])
    runner.enqueue(("acme", "q15"), [Message(Role.USER, "q15 1")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    outcomes = []

    def worker_a() -> None:
        try:
            outcomes.append(run_queue("acme", queue_id, owner="worker-a"))
        finally:
            connections.close_all()

    thread = threading.Thread(target=worker_a)
    thread.start()
    deadline = time.monotonic() + 30
    while not read_log("q15") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert read_log("q15")[0].startswith("start 0")  # A is inside job 0
    with tenant_atomic("acme"):
        ExtractionQueue.objects.filter(pk=queue_id).update(lease_owner="worker-b")
    thread.join(timeout=30)
    assert not thread.is_alive()
    (outcome_a,) = outcomes
    assert outcome_a.done == 0  # job 0 extracted, not saved: the lease was B's by then
    assert [line.split()[0] for line in read_log("q15")] == ["start", "0"]
    assert [(s, st) for s, st, _, _ in _jobs("acme")] == [(1, "running"), (2, "pending")]
    with tenant_atomic("acme"):
        assert not ExtractionJob.objects.filter(queue_id=queue_id, state="done").exists()
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get(pk=queue_id).lease_owner == "worker-b"  # kept
        ExtractionQueue.objects.release(queue_id, "worker-b")  # B's run, in short
    assert run_queue("acme", queue_id, owner="worker-b").done == 2
    assert [line.split()[0] for line in read_log("q15")] == ["start", "0", "start", "0", "1"]
    assert [(s, st, a) for s, st, a, _ in _jobs("acme")] == [(1, "done", 2), (2, "done", 1)]


def test_a_send_through_celerys_default_app_is_logged_as_an_error(caplog):
    from celery import Celery, current_app

    from tulip_memory.manager.extraction.queue import _warn_without_a_project_app

    previous = current_app._get_current_object()
    _warn_without_a_project_app()  # the test project's app, with its broker: nothing
    assert caplog.records == []
    Celery("default", fixups=[], set_as_current=False, loader="default").set_current()
    try:
        _warn_without_a_project_app()
    finally:
        previous.set_current()
    [record] = caplog.records
    assert record.levelname == "ERROR"
    assert "the project's Celery app is not loaded" in record.getMessage()


@pytest.mark.django_db
def test_celery_mode_says_which_of_the_managers_settings_the_workers_do_not_use(settings, caplog):
    settings.TULIP_MEMORY = {"MANAGER_OPTIONS": {"max_memories": 10}}
    LLMMemoryManager(PgMemory(), extract_mode="celery", max_memories=10)
    assert caplog.records == []  # what the workers build: nothing to say
    LLMMemoryManager(InMemoryStore(), extract_mode="celery", max_memories=1, keep_history=False)
    [record] = caplog.records
    assert record.levelname == "WARNING"
    assert record.getMessage() == (
        "extract_mode='celery': the workers extract with the manager they build from "
        "TULIP_MEMORY['STORE'] and ['MANAGER_OPTIONS'], not with this one's store "
        "InMemoryStore (workers: PgMemory), max_memories=1 (workers: 10), "
        "keep_history=False (workers: True); set them there."
    )


def test_a_manager_that_cannot_be_built_is_not_the_jobs_failure(celery_settings, caplog):
    # A worker whose TULIP_MEMORY passes the checks but whose manager cannot be built (here
    # the store refuses an option) must not burn the job's attempts on it: nothing is
    # claimed, the task fails loudly, and a worker that can build it runs the job later.
    from django.test import override_settings

    from tulip_memory.exceptions import ConfigurationError

    runner = _manager()._celery
    runner.enqueue(("acme", "q17"), [Message(Role.USER, "q17 0")])
    queue_id = _queue_id("acme")
    broken = {**celery_settings, "STORE_OPTIONS": {"no_such_option": 1}}
    with override_settings(TULIP_MEMORY=broken):
        for _ in range(4):  # more runs than EXTRACTION_MAX_ATTEMPTS
            with pytest.raises(ConfigurationError, match="no_such_option") as raised:
                run_queue("acme", queue_id)
    assert isinstance(raised.value.__cause__, TypeError)
    assert [(s, st, a, e) for s, st, a, e in _jobs("acme")] == [(1, "pending", 0, "")]
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get().lease_owner == ""
    [record, *_] = [r for r in caplog.records if "cannot build its memory manager" in r.message]
    assert record.levelname == "ERROR" and "no_such_option" in record.getMessage()
    assert read_log("q17") == []
    assert run_queue("acme", queue_id).done == 1  # the settings fixed
    assert [(s, st, a) for s, st, a, _ in _jobs("acme")] == [(1, "done", 1)]


def test_a_follow_up_delivered_a_little_early_books_the_next_one(celery_settings, settings):
    # The follow-up booked at a held lease's expiry runs on another worker, whose clock may
    # be ahead of the sender's: it finds the lease still held. It must book the next one,
    # or the namespace of a dead holder waits for the sweep (EXTRACTION_RESEND_AFTER).
    import time

    settings.TULIP_MEMORY = {**celery_settings, "EXTRACTION_LEASE_SECONDS": 2}
    runner = _manager()._celery
    runner.enqueue(("acme", "q18"), [Message(Role.USER, "q18 0")])
    queue_id = _queue_id("acme")
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.claim(queue_id, "dead-worker", 2.0)  # then it dies
    first = run_queue("acme", queue_id)  # the job's own message: the lease is held
    assert first.done == 0 and 0 < first.retry_in <= 2.0  # the follow-up is booked
    assert run_queue("acme", queue_id).retry_in is None  # a duplicate books no other
    time.sleep(first.retry_in - 0.1)  # the follow-up, 100 ms early
    early = run_queue("acme", queue_id)
    assert early.done == 0 and early.retry_in is not None and early.retry_in <= 0.1
    time.sleep(early.retry_in + 0.05)  # the next follow-up, on time
    assert run_queue("acme", queue_id).done == 1
    assert [line.split()[0] for line in read_log("q18")] == ["0"]


def _run_in_thread(queue_id: int, owner: str) -> tuple[Any, list[Any]]:
    """``run_queue`` as ``owner`` in a thread (a worker of its own); its outcomes."""
    import threading

    from django.db import connections

    outcomes: list[Any] = []

    def worker() -> None:
        try:
            outcomes.append(run_queue("acme", queue_id, owner=owner))
        finally:
            connections.close_all()

    thread = threading.Thread(target=worker)
    thread.start()
    return thread, outcomes


def _wait_for_log(label: str, timeout: float = 30.0) -> list[str]:
    import time

    deadline = time.monotonic() + timeout
    while not read_log(label):
        assert time.monotonic() < deadline, f"nothing logged for {label} in {timeout} s"
        time.sleep(0.02)
    return read_log(label)


@pytest.fixture
def hung_settings(celery_settings, settings, monkeypatch):
    """A job that sleeps 2.5 s ("slow"), a lease of 0.6 s and a job timeout of 0.5 s."""
    monkeypatch.setenv("TULIP_TEST_SLOW_SECONDS", "2.5")
    settings.TULIP_MEMORY = {
        **celery_settings,
        "EXTRACTION_LEASE_SECONDS": 0.6,
        "EXTRACTION_JOB_TIMEOUT_SECONDS": 0.5,
    }
    return settings.TULIP_MEMORY


def test_a_hung_attempt_forfeits_its_lease_after_the_job_timeout(hung_settings, monkeypatch):
    # Worker A's job hangs (a call that does not return: here a 2.5 s sleep) while A lives.
    # Past the job timeout its heartbeat stops renewing the lease, so the lease expires and
    # worker B claims the namespace before A's job returns; when it does, A saves nothing.
    import time

    runner = _manager()._celery
    runner.enqueue(("acme", "q19"), [Message(Role.USER, "q19 0 slow")])
    runner.enqueue(("acme", "q19"), [Message(Role.USER, "q19 1")])
    queue_id = _queue_id("acme")
    thread, outcomes = _run_in_thread(queue_id, "worker-a")
    assert _wait_for_log("q19")[0].startswith("start 0")
    started = time.monotonic()
    claimed = False
    while not claimed and time.monotonic() - started < 2.0:  # A sleeps 2.5 s
        time.sleep(0.05)
        with tenant_atomic("acme"):
            claimed = ExtractionQueue.objects.claim(queue_id, "worker-b", 30)
    assert claimed, "the lease of the hung worker was still renewed 2 s into its job"
    took = time.monotonic() - started
    assert took <= 0.5 + 0.6 + 0.3, took  # the timeout, at most one lease, and a beat
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(sequence=1)
    assert (job.state, job.attempts) == ("running", 1)
    assert job.error == (
        "JobTimeout: attempt 1 ran over EXTRACTION_JOB_TIMEOUT_SECONDS (0.5 s); its lease "
        "was left to expire"
    )
    thread.join(timeout=30)
    assert not thread.is_alive()
    (outcome_a,) = outcomes
    assert (outcome_a.done, outcome_a.failed) == (0, 0)  # A's job returned: nothing saved
    assert [line.split()[0] for line in read_log("q19")] == ["start", "0"]
    assert async_to_sync(PgMemory().get)(("acme", "q19", "project"), "last_job") is None
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get().lease_owner == "worker-b"  # A left it alone
        ExtractionQueue.objects.release(queue_id, "worker-b")  # B's run, in short:
    monkeypatch.setenv("TULIP_TEST_SLOW_SECONDS", "0.01")
    assert run_queue("acme", queue_id, owner="worker-b").done == 2
    assert [(s, st, a) for s, st, a, _ in _jobs("acme")] == [(1, "done", 2), (2, "done", 1)]
    versions = async_to_sync(LLMMemoryManager(PgMemory()).history)(
        "project", "last_job", namespace=("acme", "q19")
    )
    assert [v.content for v in versions] == ["q19 job 0", "q19 job 1"]  # in order, once


def test_a_hung_attempt_that_returns_before_a_take_over_saves_nothing_and_counts(
    hung_settings, settings
):
    # Nobody took the namespace over while A's job hung; when it returns, A still saves
    # nothing (its attempt ran over the timeout, its lease is forfeit), releases the lease
    # and asks for a run at once. The attempt counts: it was the last, so the job fails.
    settings.TULIP_MEMORY = {**hung_settings, "EXTRACTION_MAX_ATTEMPTS": 1}
    runner = _manager()._celery
    runner.enqueue(("acme", "q20"), [Message(Role.USER, "q20 0 slow")])
    runner.enqueue(("acme", "q20"), [Message(Role.USER, "q20 1")])
    queue_id = _queue_id("acme")
    outcome = run_queue("acme", queue_id, owner="worker-a")
    assert (outcome.done, outcome.failed, outcome.retry_in) == (0, 0, 0.0)
    assert async_to_sync(PgMemory().get)(("acme", "q20", "project"), "last_job") is None
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get().lease_owner == ""
    assert run_queue("acme", queue_id).done == 1
    jobs = _jobs("acme")
    assert [(s, st, a) for s, st, a, _ in jobs] == [(1, "failed", 1), (2, "done", 1)]
    assert jobs[0][3] == (
        "worker lost during attempt 1; JobTimeout: attempt 1 ran over "
        "EXTRACTION_JOB_TIMEOUT_SECONDS (0.5 s); its lease was left to expire"
    )
    assert [line.split()[0] for line in read_log("q20")] == ["start", "0", "1"]


async def test_a_failed_enqueue_never_quotes_the_conversation(celery_settings, sent_events, caplog):
    # PostgreSQL refuses a lone surrogate in JSON, quoting the JSON around it (the
    # conversation) in its error: the event and every log record above DEBUG name the
    # error's type and what failed; the database's message is logged at DEBUG only.
    import json
    import logging

    caplog.set_level(logging.DEBUG, logger="tulip_memory")
    await _end(_manager(), ("acme", "q24"), "I live at Wisteria Lane 4 \ud800")
    [failed] = [
        payload for name, payload in manager_events(sent_events) if name.endswith("extract_failed")
    ]
    assert failed["error"] == (
        f"{failed['error_type']}: enqueuing the extraction failed; its message is logged at "
        "DEBUG level"
    )
    assert failed["mode"] == "celery" and "Wisteria" not in json.dumps(failed)
    quoting = [r for r in caplog.records if "Wisteria" in logging.Formatter().format(r)]
    assert quoting and {r.levelname for r in quoting} == {"DEBUG"}
    assert await sync_to_async(_jobs)("acme") == []


@pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") != "citus",
    reason="runs on a Citus cluster (TULIP_TEST_BACKEND=citus: make test-citus)",
)
def test_on_citus_a_tenants_enqueue_claim_and_run_are_one_shards_statements(celery_settings):
    """Every statement of the job tables that an enqueue and a worker's run send for one
    tenant runs on the one shard holding the tenant (a router query: one task)."""
    from django.db import connection

    from tests.store.pg_statements import executions

    runner = _manager()._celery
    runner.enqueue(("globex", "q7"), [Message(Role.USER, "q7 0")])  # another shard's rows
    runner.enqueue(("acme", "q7"), [Message(Role.USER, "q7 0")])
    with tenant_atomic("acme"):
        queue_id = ExtractionQueue.objects.get().pk
    with executions() as calls:
        runner.enqueue(("acme", "q7"), [Message(Role.USER, "q7 1")])
        assert run_queue("acme", queue_id).done == 2
    statements = [(sql, params) for sql, params in calls if "tulip_memory_extraction" in sql]
    assert len(statements) > 10
    with tenant_atomic("acme"), connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(line for (line,) in cursor.fetchall())
            assert "Task Count: 1\n" in plan, plan
