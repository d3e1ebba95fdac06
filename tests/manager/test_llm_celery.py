"""The Celery mode with the LLM extractor, against the chat-server TEST DOUBLE of
tests/llm/chat_server.py (a local HTTP server speaking the chat-completions protocol).

The worker code runs in this process first (``run_queue``: the job row's usage, the retry
policy on a failing model, a run found done), then in a REAL Celery worker process that is
SIGKILLed right after a run's decisions were committed: the redelivered job asks the
model nothing and applies nothing twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connections

from tests.llm.chat_server import Reply
from tests.manager.celery_setup import Workers, celery_tulip_memory
from tests.manager.consolidation_helpers import (
    MODEL_FAILURES,
    conversation,
    decisions,
    facts,
    failed_requests,
)
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.worker import run_queue
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
    _caller()._celery().enqueue(NAMESPACE, conversation(text))
    with tenant_atomic("acme"):
        return ExtractionQueue.objects.get().pk


def _job() -> ExtractionJob:
    with tenant_atomic("acme"):
        return ExtractionJob.objects.get()


def _memory(key: str):
    return async_to_sync(PgMemory().get_item)((*NAMESPACE, "user"), key)


def test_the_job_row_gets_the_model_and_its_usage(llm_settings, server, events):
    queue_id = _enqueue("I'm a nurse.")
    server.add(facts(("user", "role", "The user is a nurse.")))
    assert run_queue("acme", queue_id).done == 1
    job = _job()
    assert (job.state, job.llm_model, job.llm_calls) == (JobState.DONE, "test-model", 1)
    assert job.prompt_tokens > 0 and job.completion_tokens > 0 and job.llm_failed_requests == 0
    assert _memory("role").value["content"] == "The user is a nurse."
    ((name, payload),) = events
    assert name == "memory.manager.extracted" and payload["job"] == job.pk
    assert payload["llm_calls"] == 1 and payload["prompt_tokens"] == job.prompt_tokens
    assert payload["run_id"] == f"job-{job.pk}"


@pytest.mark.parametrize("case", list(MODEL_FAILURES), ids=list(MODEL_FAILURES))
def test_a_failing_model_follows_the_retry_policy_and_its_tokens_are_counted(
    celery_env, server, settings, events, case
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
    (name, payload), *_ = events
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


def test_a_worker_that_lost_its_lease_during_the_model_call_saves_nothing(llm_settings, server):
    """The lease is renewed between the model calls and the apply: a worker whose lease
    another worker took while it waited for the model applies and journals nothing."""
    queue_id = _enqueue("I'm a nurse.")
    server.add(Reply(answer=facts(("user", "role", "The user is a nurse.")), delay=0.5))

    def take_the_lease_once_the_model_is_asked() -> None:
        try:
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.01)
            with tenant_atomic("acme"):
                ExtractionQueue.objects.filter(pk=queue_id).update(lease_owner="worker-b")
        finally:
            connections.close_all()

    thief = threading.Thread(target=take_the_lease_once_the_model_is_asked)
    thief.start()
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
