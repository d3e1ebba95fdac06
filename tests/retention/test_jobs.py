"""Extraction-job retention on PostgreSQL: payloads purged after N hours (or as a job
finishes), finished rows deleted after N days, failed jobs keep their payload until
deleted, open jobs are never touched, tenants one at a time under row-level security."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from tulip_memory.manager.extraction.worker import run_queue
from tulip_memory.models import ExtractionJob, JobState
from tulip_memory.retention.jobs import cleanup_jobs, cleanup_tenant_jobs
from tulip_memory.retention.policy import RetentionPolicy
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOAD = {"messages": [{"role": "user", "content": "I live in Berlin."}]}


def _job(tenant: str, state: str, finished_hours_ago: float | None) -> int:
    with tenant_atomic(tenant):
        job_id, _queue_id = ExtractionJob.objects.enqueue((tenant, "memories"), PAYLOAD)
        finished = (
            None if finished_hours_ago is None else Now() - timedelta(hours=finished_hours_ago)
        )
        ExtractionJob.objects.filter(pk=job_id).update(state=state, finished_at=finished)
    return job_id


def _rows(tenant: str) -> dict[int, tuple[str, dict]]:
    with tenant_atomic(tenant):
        return {
            pk: (state, payload)
            for pk, state, payload in ExtractionJob.objects.values_list("pk", "state", "payload")
        }


def test_payloads_and_rows_go_by_age_and_state():
    recent_done = _job("acme", JobState.DONE, 1)
    old_done = _job("acme", JobState.DONE, 30)
    ancient_done = _job("acme", JobState.DONE, 24 * 10)
    old_failed = _job("acme", JobState.FAILED, 30)
    ancient_failed = _job("acme", JobState.FAILED, 24 * 10)
    pending = _job("acme", JobState.PENDING, None)
    other = _job("globex", JobState.DONE, 24 * 10)
    policy = RetentionPolicy(
        job_payload_purge_after=timedelta(hours=24), job_delete_after=timedelta(days=7)
    )

    dry = cleanup_tenant_jobs("acme", policy=policy, dry_run=True)
    assert (dry.purged, dry.deleted) == (1, 2)
    assert all(payload == PAYLOAD for _, payload in _rows("acme").values())

    report = cleanup_jobs(tenants=["acme"], policy=policy)["acme"]
    assert (report.purged, report.deleted) == (1, 2)
    assert _rows("acme") == {
        recent_done: ("done", PAYLOAD),
        old_done: ("done", {}),
        old_failed: ("failed", PAYLOAD),  # the admin may retry it: it keeps the conversation
        pending: ("pending", PAYLOAD),
    }
    assert ancient_done not in _rows("acme") and ancient_failed not in _rows("acme")
    assert _rows("globex") == {other: ("done", PAYLOAD)}  # not named: untouched
    again = cleanup_tenant_jobs("acme", policy=policy)
    assert (again.purged, again.deleted) == (0, 0)


def test_every_tenant_and_a_policy_of_nothing():
    _job("acme", JobState.DONE, 2)
    _job("globex", JobState.DONE, 2)
    assert {t: (r.purged, r.deleted) for t, r in cleanup_jobs(policy=RetentionPolicy()).items()} \
        == {"acme": (0, 0), "globex": (0, 0)}  # fmt: skip
    purged = cleanup_jobs(policy=RetentionPolicy(job_payload_purge_after=timedelta(0)))
    assert {t: r.purged for t, r in purged.items()} == {"acme": 1, "globex": 1}


def test_a_zero_hour_purge_empties_the_payload_as_the_worker_finishes(settings):
    settings.TULIP_MEMORY = {
        "STORE": "tulip_memory.store.InMemoryStore",
        "EXTRACTOR": None,
        "JOB_PAYLOAD_PURGE_AFTER_HOURS": 0,
    }
    with tenant_atomic("acme"):
        job_id, queue_id = ExtractionJob.objects.enqueue(("acme", "memories"), PAYLOAD)
    assert run_queue("acme", queue_id, owner="test-worker").done == 1
    # The conversation goes; what the job did to memories stays.
    assert _rows("acme") == {job_id: ("done", {"applied": [["SAVE", "user", "location"]]})}
    settings.TULIP_MEMORY = {**settings.TULIP_MEMORY, "JOB_PAYLOAD_PURGE_AFTER_HOURS": None}
    with tenant_atomic("acme"):
        kept_id, queue_id = ExtractionJob.objects.enqueue(("acme", "memories"), PAYLOAD)
    assert run_queue("acme", queue_id, owner="test-worker").done == 1
    assert _rows("acme")[kept_id] == (
        "done",
        {**PAYLOAD, "applied": [["SAVE", "user", "location"]]},
    )
