"""The Celery mode with the LLM extractor, against the chat-server TEST DOUBLE of
tests/llm/chat_server.py (a local HTTP server speaking the chat-completions protocol).

The worker code runs in this process first (``run_queue``: the job row's usage, the retry
policy on a failing model, a run found done, attempts that lost their lease or were cut by
a database error), then in a
REAL Celery worker process that is SIGKILLed right after a run's decisions were committed:
the redelivered job asks the model nothing and applies nothing twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import OperationalError, connection, connections

from tests.llm.chat_server import Reply
from tests.manager.celery_setup import Workers, celery_tulip_memory
from tests.manager.conftest import manager_events
from tests.manager.consolidation_helpers import (
    MODEL_FAILURES,
    conversation,
    decisions,
    facts,
    failed_requests,
)
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.extraction.worker import run_queue
from tulip_memory.models import ExtractionJob, ExtractionQueue, JobState
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

NAMESPACE = ("acme", "llm", "u1")


def _settings(server, queue: str, **llm_options) -> dict:
    return {
        **celery_tulip_memory(),
        "EXTRACTOR": None,
        "LLM": {
            "BASE_URL": server.url,
            "MODEL": "test-model",
            "RETRY_BACKOFF": 0.01,
            **llm_options,
        },
        "CELERY_QUEUE": queue,
    }


@pytest.fixture
def llm_settings(celery_env, server, settings):
    """A queue no worker consumes: this process runs the worker code itself."""
    settings.TULIP_MEMORY = _settings(server, f"{celery_env}_llm_local")
    return settings.TULIP_MEMORY


def _caller() -> LLMMemoryManager:
    return LLMMemoryManager(InMemoryStore(), extract_mode="celery")


def _enqueue(text: str) -> int:
    _caller()._celery.enqueue(NAMESPACE, conversation(text))
    with tenant_atomic("acme"):
        return ExtractionQueue.objects.get().pk


def _job() -> ExtractionJob:
    with tenant_atomic("acme"):
        return ExtractionJob.objects.get()


def _memory(key: str):
    return async_to_sync(PgMemory().get_item)((*NAMESPACE, "user"), key)


def test_the_job_row_gets_the_model_and_its_usage(llm_settings, server, sent_events):
    queue_id = _enqueue("I'm a nurse.")
    server.add(facts(("user", "role", "The user is a nurse.")))
    assert run_queue("acme", queue_id).done == 1
    job = _job()
    assert (job.state, job.llm_model, job.llm_calls) == (JobState.DONE, "test-model", 1)
    assert job.prompt_tokens > 0 and job.completion_tokens > 0 and job.llm_failed_requests == 0
    assert _memory("role").value["content"] == "The user is a nurse."
    assert job.applied_operations() == [("ADD", "user", "role")]  # listed by the admin
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["job"] == job.pk
    assert payload["llm_calls"] == 1 and payload["prompt_tokens"] == job.prompt_tokens
    assert payload["run_id"] == f"job-{job.pk}"


@pytest.mark.parametrize("case", list(MODEL_FAILURES), ids=list(MODEL_FAILURES))
def test_a_failing_model_follows_the_retry_policy_and_its_tokens_are_counted(
    celery_env, server, settings, sent_events, case
):
    options, replies, reason = MODEL_FAILURES[case]
    settings.TULIP_MEMORY = _settings(server, f"{celery_env}_llm_local", **options)
    async_to_sync(LLMMemoryManager(PgMemory(), namespace_prefix=NAMESPACE).save)(
        [Memory(MemoryType.USER, "role", "The user is a nurse.")]
    )
    queue_id = _enqueue("I'm a surgeon now.")
    # Attempt 1: facts, then the decision call fails.
    server.add(facts(("user", "role", "The user is a surgeon.")), *replies)
    outcome = run_queue("acme", queue_id)
    assert outcome.retried == 1 and outcome.retry_in is not None
    job = _job()
    assert job.state == JobState.PENDING and "LLMError" in job.error
    assert job.llm_calls >= 1 and job.prompt_tokens > 0  # the facts call at least
    failed = failed_requests(replies, reason)
    assert job.llm_failed_requests == failed
    assert _memory("role").value["content"] == "The user is a nurse."  # nothing applied
    (name, payload), *_ = manager_events(sent_events)
    assert name == "memory.manager.extract_failed" and payload["reason"] == reason
    assert payload["final"] is False and payload["llm_calls"] == job.llm_calls
    # Attempt 2 succeeds: its calls are added to the row.
    spent = job.llm_calls
    server.add(
        facts(("user", "role", "The user is a surgeon.")),
        decisions((0, "UPDATE", "user", "role", "The user is a surgeon.")),
    )
    time.sleep(outcome.retry_in + 0.05)
    assert run_queue("acme", queue_id).done == 1
    job = _job()
    assert (job.state, job.attempts, job.llm_calls) == (JobState.DONE, 2, spent + 2)
    assert job.llm_failed_requests == failed  # attempt 2 had none to add
    assert _memory("role").value["content"] == "The user is a surgeon."
    assert len(_history()) == 2


def _history():
    manager = LLMMemoryManager(PgMemory(), namespace_prefix=NAMESPACE)
    return async_to_sync(manager.history)(MemoryType.USER, "role")


def test_a_job_found_running_after_its_run_was_applied_applies_nothing(llm_settings, server):
    queue_id = _enqueue("I'm a surgeon.")
    server.add(facts(("user", "role", "The user is a surgeon.")))
    assert run_queue("acme", queue_id).done == 1
    before = _memory("role")
    # The state a worker killed after the commit and before "done" leaves behind.
    with tenant_atomic("acme"):
        ExtractionJob.objects.update(state=JobState.RUNNING)
    assert run_queue("acme", queue_id).done == 1
    assert len(server.requests) == 1  # the model was not asked again
    after = _memory("role")
    assert after.version == before.version and after.updated_at == before.updated_at
    assert _job().attempts == 2


def _once_the_model_is_asked(server, action: Callable[[], object]) -> threading.Thread:
    """A started thread that runs ``action`` (on its own database connections) as soon as
    the chat-server double has its first request: while a worker waits for the model."""

    def run() -> None:
        try:
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            action()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _hand_the_lease_to(queue_id: int, owner: str) -> None:
    """What a claim by ``owner`` of the lease, expired under its holder, comes to."""
    with tenant_atomic("acme"):
        ExtractionQueue.objects.filter(pk=queue_id).update(lease_owner=owner)


def test_a_worker_that_lost_its_lease_during_the_model_call_saves_nothing(llm_settings, server):
    """The lease is renewed between the model calls and the apply: a worker whose lease
    another worker took while it waited for the model applies and journals nothing."""
    queue_id = _enqueue("I'm a nurse.")
    server.add(Reply(answer=facts(("user", "role", "The user is a nurse.")), delay=0.5))
    thief = _once_the_model_is_asked(server, lambda: _hand_the_lease_to(queue_id, "worker-b"))
    outcome = run_queue("acme", queue_id, owner="worker-a")
    thief.join(timeout=30)
    assert len(server.requests) == 1  # the run was planned: the model answered
    assert outcome.done == 0
    assert _memory("role") is None
    runs = async_to_sync(PgMemory().list_keys)((*NAMESPACE, "_extraction_runs"))
    assert runs == []  # not even journaled: worker-b runs the job from the start
    assert _job().state == JobState.RUNNING
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get(pk=queue_id).lease_owner == "worker-b"


def _usage_of(job: ExtractionJob) -> tuple[int, int, int, int]:
    """The job row's chat-model usage: calls, prompt and completion tokens, failed requests."""
    return (job.llm_calls, job.prompt_tokens, job.completion_tokens, job.llm_failed_requests)


def test_an_attempt_that_lost_its_lease_adds_its_usage_to_the_job_row(llm_settings, server):
    """The model answered worker A, which then found its lease taken: A saves nothing,
    but the model was paid, so its call goes onto the row. Worker B runs the job again
    and asks the model again: the row then counts both attempts, each once."""
    queue_id = _enqueue("I'm a nurse.")
    nurse = facts(("user", "role", "The user is a nurse."))
    server.add(Reply(answer=nurse, delay=0.5), nurse)
    thief = _once_the_model_is_asked(server, lambda: _hand_the_lease_to(queue_id, "worker-b"))
    assert run_queue("acme", queue_id, owner="worker-a").done == 0
    thief.join(timeout=30)
    assert _memory("role") is None  # the fence still keeps A from saving
    job = _job()
    assert (job.state, job.worker, job.llm_model) == (JobState.RUNNING, "worker-a", "test-model")
    calls, prompt, completion, failed = lost = _usage_of(job)
    assert (calls, failed) == (1, 0) and prompt > 0 and completion > 0
    # Worker B's run (in short): the same request again, the same answer, the same usage.
    with tenant_atomic("acme"):
        ExtractionQueue.objects.release(queue_id, "worker-b")
    assert run_queue("acme", queue_id, owner="worker-b").done == 1
    job = _job()
    assert (job.state, job.attempts, job.worker) == (JobState.DONE, 2, "worker-b")
    assert len(server.requests) == 2
    assert _usage_of(job) == tuple(2 * spent for spent in lost)
    assert _memory("role").value["content"] == "The user is a nurse."


# Worker A's second call, made once worker B saved the memory it is about: answered (then
# A's lease fence fails) or failing (an LLMError, no reply scripted: 4 requests, no answer).
A_DECIDES = {
    "answered": ([decisions((0, "NONE"))], 0),
    "model_failed": ([], 4),
}


@pytest.mark.parametrize("case", ["answered", "model_failed"])
def test_a_lost_attempts_usage_is_added_to_what_the_new_holder_recorded(
    llm_settings, server, sent_events, case
):
    """Worker B claims the lease and finishes the job while worker A waits for the model:
    A's usage is added to B's row (an increment, not A's stale totals written back),
    leaving B's state, worker and model as they are. A's attempt, stopped by its fence or
    failing, is not the job's failure: no ``extract_failed``, nothing counted as retried."""
    queue_id = _enqueue("I'm a nurse.")
    nurse = facts(("user", "role", "The user is a nurse."))
    a_decides, failed = A_DECIDES[case]
    server.add(Reply(answer=nurse, delay=2.0), nurse, *a_decides)
    by_b: list[Any] = []

    def worker_b_runs_the_job() -> None:
        with tenant_atomic("acme"):  # A's lease is gone (expired, say): B claims it
            ExtractionQueue.objects.release(queue_id, "worker-a")
        by_b.append(run_queue("acme", queue_id, owner="worker-b"))
        by_b.append(_usage_of(_job()))

    worker_b = _once_the_model_is_asked(server, worker_b_runs_the_job)
    outcome_a = run_queue("acme", queue_id, owner="worker-a")
    worker_b.join(timeout=30)
    assert (outcome_a.done, outcome_a.retried, outcome_a.failed) == (0, 0, 0)
    assert [name for name, _ in manager_events(sent_events)] == ["memory.manager.extracted"]  # B's
    outcome_b, usage_b = by_b  # B's row before A's usage was added to it
    assert outcome_b.done == 1 and usage_b[0] == 1
    job = _job()
    assert (job.state, job.attempts, job.worker) == (JobState.DONE, 2, "worker-b")
    assert job.llm_model == "test-model" and not job.error
    assert _memory("role").value["content"] == "The user is a nurse."
    calls, prompt, completion, unanswered = _usage_of(job)
    # Every request the model answered counted once; A's calls on top of B's.
    assert (calls, unanswered) == (len(server.requests) - failed, failed)
    assert prompt > usage_b[1] and completion > usage_b[2]


def _end_backend(pid: int) -> None:
    """End the database session ``pid``, as a server restart or an administrator does."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.parametrize("charged", [False, True], ids=["given_back", "last_retry"])
def test_an_attempt_cut_by_a_database_error_adds_its_usage_to_the_job_row(
    llm_settings, server, settings, sent_events, charged
):
    """The model answered, then the worker's database session ended under it (its lease
    fence fails): the attempt is given back (charged on the task's last retry) and the
    task retries, and the model call it paid for is on the job row, written on a new
    connection."""
    settings.TULIP_MEMORY = {**llm_settings, "STORE": "tulip_memory.store.InMemoryStore"}
    queue_id = _enqueue("I'm a nurse.")
    server.add(Reply(answer=facts(("user", "role", "The user is a nurse.")), delay=0.5))
    with connection.cursor() as cursor:  # the session run_queue works on (this thread's)
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    cutter = _once_the_model_is_asked(server, lambda: _end_backend(pid))
    with pytest.raises(OperationalError):
        run_queue("acme", queue_id, owner="worker-a", charge_database_errors=charged)
    cutter.join(timeout=30)
    assert len(server.requests) == 1
    job = _job()
    assert (job.state, job.attempts) == (JobState.PENDING, 1 if charged else 0)
    assert job.error.startswith("OperationalError: ") if charged else not job.error
    calls, prompt, completion, failed = _usage_of(job)
    assert (job.llm_model, calls, failed) == ("test-model", 1, 0)
    assert prompt > 0 and completion > 0
    if charged:
        ((name, payload),) = manager_events(sent_events)
        assert name == "memory.manager.extract_failed" and payload["final"] is False
    else:
        assert manager_events(sent_events) == []


@pytest.mark.slow
async def test_a_real_worker_killed_after_the_commit_is_redelivered_without_effect(
    celery_env, server, settings, tmp_path
):
    queue = f"{celery_env}_llm"
    pause = tmp_path / "paused"
    settings.TULIP_MEMORY = _settings(server, queue)
    worker = Workers(
        1,
        tmp_path,
        env={
            "TULIP_TEST_CELERY_QUEUE": queue,
            "TULIP_TEST_LLM_BASE_URL": server.url,
            "TULIP_TEST_STORE": "tests.manager.pausing_store.PausingPgMemory",
            "TULIP_TEST_PAUSE_FILE": str(pause),
        },
    )
    await sync_to_async(worker.start)()
    try:
        server.add(
            facts(("user", "role", "The user is a surgeon.")),
            decisions((0, "UPDATE", "user", "role", "The user is a surgeon.")),
        )
        await LLMMemoryManager(PgMemory(), namespace_prefix=NAMESPACE).save(
            [Memory(MemoryType.USER, "role", "The user is a nurse.")]
        )
        caller = LLMMemoryManager(InMemoryStore(), extract_mode="celery")
        with caller.scoped(NAMESPACE):
            await caller.on_session_end(AgentState(messages=conversation("I'm a surgeon now.")))
        deadline = time.monotonic() + 60
        while not pause.exists() or not pause.read_text().strip():
            assert time.monotonic() < deadline, worker.logs()
            await asyncio.sleep(0.05)
        victim = int(pause.read_text().split()[1])
        os.kill(victim, signal.SIGKILL)  # the run is committed, its job still "running"
        async with asyncio.timeout(60):
            await caller.drain()
        job = await sync_to_async(_job)()
        assert (job.state, job.attempts) == (JobState.DONE, 2), worker.logs()
        assert len(server.requests) == 2  # facts + decisions, once
        role = await sync_to_async(_memory)("role")
        assert role.value["content"] == "The user is a surgeon." and role.version == 2
        history = await sync_to_async(_history)()
        assert [v.content for v in history] == ["The user is a nurse.", "The user is a surgeon."]
    finally:
        await sync_to_async(worker.stop)()
