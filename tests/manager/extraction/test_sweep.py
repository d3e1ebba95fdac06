"""The periodic sweep, its schedule, the caller with the broker down, and runs that lose their
database connection — in this process (tests/manager/extraction/test_celery_faults.py drills
the same against real workers, a real beat and a restarted server).

The messages the sweep sends go to a queue no worker consumes; the tests read them back
from Redis.
"""

from __future__ import annotations

import base64
import json
import math
import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from celery import Celery, current_app
from django.db import OperationalError, transaction
from django.db.models.functions import Now

from tests.manager.extraction.test_queue import celery_settings  # noqa: F401 (a local queue)
from tests.manager.extractors import read_log
from tests.manager.faults import closed_port
from tulip_memory.core.task_names import (
    RUN_EXTRACTION_QUEUE,
    SWEEP_EXTRACTION_QUEUES,
)
from tulip_memory.manager import LLMMemoryManager
from tulip_memory.manager.extraction.queue import resend_stalled_queues
from tulip_memory.manager.extraction.worker import run_queue
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob, ExtractionQueue, JobState, Tenant
from tulip_memory.retention.sweeps import (
    SWEEP_PERIODIC_TASK_NAME,
    beat_schedule_entry,
    schedule_sweep_in_database,
)
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore, PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def broker_queue(celery_settings):  # noqa: F811
    """The Redis list of the local queue, emptied first; a reader of its messages."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    name = celery_settings["CELERY_QUEUE"]
    client.delete(name)

    def messages() -> list[tuple[str, list, dict]]:
        """(task name, args, headers) of each message, oldest first."""
        found = []
        for raw in reversed(client.lrange(name, 0, -1)):  # kombu LPUSHes
            message = json.loads(raw)
            args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            found.append((message["headers"]["task"], args, message["headers"]))
        return found

    yield messages
    client.delete(name)
    client.close()


def _queue(tenant: str, label: str, *texts: str) -> int:
    runner = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=(tenant, "x"), extract_mode="celery"
    )._celery
    for text in texts:
        runner.enqueue((tenant, label), [Message(Role.USER, text)])
    with tenant_atomic(tenant):
        return ExtractionQueue.objects.get(namespace=f"{tenant}/{label}").pk


def _age_jobs(tenant: str, queue_id: int, seconds: float) -> None:
    with tenant_atomic(tenant):
        ExtractionJob.objects.filter(queue_id=queue_id).update(
            created_at=Now() - timedelta(seconds=seconds)
        )


def test_the_sweep_resends_the_stalled_queues_of_every_tenant_and_no_other(
    celery_settings,  # noqa: F811
    broker_queue,
):
    waited = celery_settings["EXTRACTION_RESEND_AFTER"]
    stalled = {
        ("acme", _queue("acme", "lost", "lost 0")),  # broker down at enqueue
        ("globex", _queue("globex", "lost", "lost 0")),  # another tenant
    }
    dead = _queue("acme", "dead", "dead 0")  # its worker's host died mid-job
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(queue_id=dead).update(state=JobState.RUNNING, attempts=1)
        ExtractionQueue.objects.filter(pk=dead).update(
            lease_owner="dead-host:1:x", lease_expires_at=Now() - timedelta(seconds=1)
        )
    stalled.add(("acme", dead))
    fresh = _queue("acme", "fresh", "fresh 0")  # its message may still be on its way
    held = _queue("acme", "held", "held 0")  # a live worker runs it
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.claim(held, "live-worker", 60)
    waiting = _queue("acme", "waiting", "waiting 0")  # its retry is not due
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(queue_id=waiting).update(
            run_after=Now() + timedelta(seconds=60)
        )
    finished = _queue("acme", "finished", "finished 0")
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(queue_id=finished).update(state=JobState.DONE)
    for tenant, queue_id in [*stalled, ("acme", held), ("acme", waiting), ("acme", finished)]:
        _age_jobs(tenant, queue_id, waited + 5)
    broker_queue_before = broker_queue()
    assert len(broker_queue_before) == 7  # one message per enqueue, sent on commit

    assert resend_stalled_queues() == 3
    sent = broker_queue()[len(broker_queue_before) :]
    assert {tuple(args) for _task, args, _headers in sent} == stalled
    assert {task for task, _args, _headers in sent} == {RUN_EXTRACTION_QUEUE}
    assert all(headers["expires"] for _task, _args, headers in sent)  # no pile-up
    assert fresh not in {queue_id for _tenant, queue_id in stalled}
    # The dead worker's job is run again by the next claim (that attempt counts).
    outcome = run_queue("acme", dead)
    assert outcome.done == 1
    assert read_log("dead") == ["0 " + read_log("dead")[0].split()[1]]


def test_every_enqueue_lists_its_tenant_once_and_outside_row_level_security(
    celery_settings,  # noqa: F811
):
    _queue("acme", "t1", "t1 0", "t1 1")
    _queue("globex", "t1", "t1 0")
    with transaction.atomic():  # no tenant pinned: the directory is visible, jobs are not
        assert {"acme", "globex"} <= set(Tenant.objects.values_list("name", flat=True))
        assert not ExtractionJob.objects.exists()


def test_the_beat_schedule_entry(celery_settings):  # noqa: F811
    assert beat_schedule_entry() == {
        "task": SWEEP_EXTRACTION_QUEUES,
        "schedule": 60.0,
        "options": {"queue": "tulip_memory", "expires": 60.0},
    }
    entry = beat_schedule_entry(every=5, queue="memory")
    assert entry["schedule"] == 5.0 and entry["options"] == {"queue": "memory", "expires": 5.0}


@pytest.mark.parametrize("every", [0, -1, math.nan, math.inf, True, "60", None])
def test_a_bad_sweep_interval_is_a_value_error(celery_settings, every):  # noqa: F811
    with pytest.raises(ValueError, match="sweep interval"):
        beat_schedule_entry(every=every)


@pytest.mark.parametrize("queue", ["", "  ", None])
def test_a_bad_sweep_queue_is_a_value_error(celery_settings, queue):  # noqa: F811
    with pytest.raises(ValueError, match="queue"):
        beat_schedule_entry(queue=queue)


def test_the_sweep_kept_in_django_celery_beat(celery_settings):  # noqa: F811
    from django_celery_beat.models import PeriodicTask

    task = schedule_sweep_in_database(every=30)
    assert (task.name, task.task, task.queue) == (
        SWEEP_PERIODIC_TASK_NAME,
        SWEEP_EXTRACTION_QUEUES,
        celery_settings["CELERY_QUEUE"],
    )
    assert (task.interval.every, task.interval.period, task.expire_seconds) == (30, "seconds", 30)
    again = schedule_sweep_in_database(every=45, queue="memory")  # idempotent: updated
    assert PeriodicTask.objects.filter(name=SWEEP_PERIODIC_TASK_NAME).count() == 1
    assert (again.pk, again.interval.every, again.queue) == (task.pk, 45, "memory")
    with pytest.raises(ValueError, match="whole number of seconds"):
        schedule_sweep_in_database(every=1.5)
    stored = PeriodicTask.objects.get(name=SWEEP_PERIODIC_TASK_NAME)
    assert (stored.interval.every, stored.queue) == (45, "memory")  # nothing changed


def test_without_django_celery_beat_the_helper_names_the_extra(celery_settings, monkeypatch):  # noqa: F811
    import sys

    monkeypatch.setitem(sys.modules, "django_celery_beat.models", None)  # not installed
    with pytest.raises(ImportError, match=r"tulip-memory\[beat\]"):
        schedule_sweep_in_database(every=30)


def test_session_end_with_the_broker_down_returns_at_once_and_records_the_job(
    celery_settings,  # noqa: F811
    broker_queue,
):
    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "x"), extract_mode="celery"
    )
    state = AgentState(messages=[Message(Role.USER, "down 0")])
    previous = current_app._get_current_object()
    down = Celery("broker-down", broker=f"redis://127.0.0.1:{closed_port()}/0")
    down.set_current()
    try:
        with manager.scoped(("acme", "down")):
            started = time.perf_counter()
            async_to_sync(manager.on_session_end)(state)
            elapsed = time.perf_counter() - started
    finally:
        previous.set_current()
        down.close()
    # The bound asked for is 1 s; Celery's default publish retries alone take 0.6-0.8 s,
    # so half of it catches a caller that waits on the broker again.
    assert elapsed <= 0.5, elapsed
    with tenant_atomic("acme"):
        assert list(ExtractionJob.objects.values_list("sequence", "state")) == [(1, "pending")]
    assert broker_queue() == []  # nothing reached a broker: the sweep will send it
    queue_id = _queue("acme", "down")
    _age_jobs("acme", queue_id, celery_settings["EXTRACTION_RESEND_AFTER"] + 1)
    assert resend_stalled_queues() == 1
    assert [tuple(args) for _task, args, _headers in broker_queue()] == [("acme", queue_id)]


def test_a_run_cut_by_a_database_restart_releases_its_lease_on_a_new_connection(
    celery_settings,  # noqa: F811
):
    queue_id = _queue("acme", "cut", "cut 0 drop", "cut 1")
    with pytest.raises(OperationalError):  # the task's autoretry takes it from here
        run_queue("acme", queue_id, owner="cut-worker")
    with tenant_atomic("acme"):
        queue = ExtractionQueue.objects.get(pk=queue_id)
        job = ExtractionJob.objects.get(queue_id=queue_id, sequence=1)
    # Released at once: the retry need not wait for the lease to expire.
    assert (queue.lease_owner, queue.lease_expires_at) == ("", None)
    # Not the job's failure: pending again, the attempt given back (on a new connection).
    assert (job.state, job.attempts, job.error) == (JobState.PENDING, 0, "")
    outcome = run_queue("acme", queue_id)
    assert (outcome.done, outcome.failed) == (2, 0)
    # Job 0 ran to its failed save, then again in full; job 1 after it.
    assert [line.split()[0] for line in read_log("cut")] == ["drop", "0", "0", "1"]
    with tenant_atomic("acme"):
        rows = list(ExtractionJob.objects.order_by("sequence").values_list("state", "attempts"))
    assert rows == [(JobState.DONE, 1), (JobState.DONE, 1)]


def test_a_connection_ended_inside_a_transaction_of_the_job_uses_no_attempt(
    celery_settings,  # noqa: F811
):
    # The server ends the job's session inside one of its transactions (an administrator,
    # a failover): Django drops the connection as the transaction ends, so the worker's
    # next query reconnects. The error is the database's, not the job's: no attempt used,
    # however often it happens (here on each of the first three runs, as many as
    # EXTRACTION_MAX_ATTEMPTS: counted, they would have failed the job).
    queue_id = _queue("acme", "ended", "ended 0 cut", "ended 1")
    for _ in range(3):
        with pytest.raises(OperationalError):  # the task's autoretry takes it from here
            run_queue("acme", queue_id, owner="cut-worker")
        with tenant_atomic("acme"):
            job = ExtractionJob.objects.get(queue_id=queue_id, sequence=1)
            assert ExtractionQueue.objects.get(pk=queue_id).lease_owner == ""
        assert (job.state, job.attempts, job.error) == (JobState.PENDING, 0, "")
    assert run_queue("acme", queue_id).done == 2
    assert [line.split()[0] for line in read_log("ended")] == ["cut", "cut", "cut", "0", "1"]
    with tenant_atomic("acme"):
        rows = list(ExtractionJob.objects.order_by("sequence").values_list("state", "attempts"))
    assert rows == [(JobState.DONE, 1), (JobState.DONE, 1)]


def test_on_the_tasks_last_retry_a_database_error_counts_as_the_jobs_attempt(
    celery_settings,  # noqa: F811
):
    # Bounded: a job whose runs always meet a database error (a statement the server always
    # cancels, a session always ended) must not stay open for ever. The task's last retry
    # charges the attempt, so the job fails after EXTRACTION_MAX_ATTEMPTS rounds of retries.
    queue_id = _queue("acme", "always", "always 0 cutever", "always 1")
    with pytest.raises(OperationalError):
        run_queue("acme", queue_id, charge_database_errors=True)
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(queue_id=queue_id, sequence=1)
    assert (job.state, job.attempts) == (JobState.PENDING, 1)
    assert job.error.startswith("OperationalError: ") and job.run_after is not None
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(pk=job.pk).update(run_after=None, attempts=2)
    with pytest.raises(OperationalError):
        run_queue("acme", queue_id, charge_database_errors=True)  # the last attempt
    with tenant_atomic("acme"):
        rows = list(ExtractionJob.objects.order_by("sequence").values_list("state", "attempts"))
    assert rows == [(JobState.FAILED, 3), (JobState.PENDING, 0)]
    assert run_queue("acme", queue_id).done == 1  # the namespace moves on


def test_drain_waits_out_a_database_restart(celery_settings):  # noqa: F811
    from tests.manager.extractors import _drop_own_connection

    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=("acme", "x"), extract_mode="celery"
    )
    with manager.scoped(("acme", "restart")):
        async_to_sync(manager.on_session_end)(AgentState(messages=[Message(Role.USER, "r 0")]))
    run_queue("acme", _queue("acme", "restart"))
    _drop_own_connection()  # this thread's connection, where drain() polls, is dead

    async def drain() -> None:
        import asyncio

        async with asyncio.timeout(10):
            await manager.drain()

    async_to_sync(drain)()
    assert manager.pending_extractions == 0


def test_a_worker_that_lost_its_lease_mid_job_saves_nothing_and_stops(celery_settings):  # noqa: F811
    # Its lease expired during a database outage and another worker claimed the namespace
    # while this one was extracting: the new holder runs the job again, so this one's save
    # would put the job in effect twice. The lease is renewed right before the save.
    queue_id = _queue("acme", "stolen", "stolen 0 steal", "stolen 1")
    outcome = run_queue("acme", queue_id, owner="first")
    assert (outcome.done, outcome.failed, outcome.retried) == (0, 0, 0)
    assert [line.split()[0] for line in read_log("stolen")] == ["steal", "0"]  # extracted
    saved = async_to_sync(PgMemory().get)(("acme", "stolen", "project"), "last_job")
    assert saved is None  # ... and not saved
    with tenant_atomic("acme"):
        assert ExtractionQueue.objects.get(pk=queue_id).lease_owner == "thief"
        states = list(
            ExtractionJob.objects.order_by("sequence").values_list("state", "attempts", "worker")
        )
    assert states == [(JobState.RUNNING, 1, "first"), (JobState.PENDING, 0, "")]
