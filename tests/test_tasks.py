"""The sweep tasks of tulip_memory.tasks, run in this process (``apply``); a real worker
runs the expiry sweep in tests/manager/test_sweep_tasks_on_workers.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync

from tests.backends.test_contract import make_state
from tulip_memory.backends import PostgreSQLCheckpointer
from tulip_memory.clock import ManualClock, utc_now
from tulip_memory.models import ExtractionJob, JobState
from tulip_memory.store import HolographicStore, PgMemory
from tulip_memory.tasks import cleanup_extraction_jobs, prune_checkpoints, sweep_expired_items
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


def test_sweep_expired_items_sweeps_pgmemorys_tenants(settings):
    settings.TULIP_MEMORY = {"STORE": "tulip_memory.store.PgMemory"}
    clock = ManualClock(utc_now() - timedelta(hours=1))  # written an hour ago
    store = PgMemory(clock=clock)
    async_to_sync(store.put)(("acme", "n"), "gone", 1, ttl=60)
    async_to_sync(store.put)(("globex", "n"), "gone", 1, ttl=60)
    async_to_sync(store.put)(("acme", "n"), "kept", 1, ttl=7200)
    assert sweep_expired_items.apply().get() == 2
    assert async_to_sync(PgMemory().list_keys)(("acme", "n")) == ["kept"]


def test_sweep_expired_items_builds_another_ttl_store(settings, tmp_path):
    path = tmp_path / "memory.sqlite3"
    writer = HolographicStore(path, clock=ManualClock(utc_now() - timedelta(hours=1)))
    async_to_sync(writer.put)(("acme",), "gone", 1, ttl=60)
    async_to_sync(writer.close)()
    settings.TULIP_MEMORY = {
        "STORE": "tulip_memory.store.HolographicStore",
        "STORE_OPTIONS": {"path": str(path)},
    }
    assert sweep_expired_items.apply().get() == 1
    settings.TULIP_MEMORY = {"STORE": "tests.store.conftest.MinimalStore"}  # no ttl at all
    assert sweep_expired_items.apply().get() == 0


def test_cleanup_extraction_jobs_and_prune_checkpoints_follow_the_settings(settings):
    settings.TULIP_MEMORY = {"JOB_PAYLOAD_PURGE_AFTER_HOURS": 0, "CHECKPOINT_KEEP_LAST": 1}
    with tenant_atomic("acme"):
        job_id, _ = ExtractionJob.objects.enqueue(("acme", "m"), {"messages": []})
        ExtractionJob.objects.filter(pk=job_id).update(state=JobState.DONE, finished_at=utc_now())
    assert cleanup_extraction_jobs.apply().get() == {"purged": 1, "deleted": 0}
    checkpointer = PostgreSQLCheckpointer(tenant="acme")
    for turn in range(3):
        async_to_sync(checkpointer.save)(make_state(turn), "t")
    assert prune_checkpoints.apply().get() == {"checkpoints": 2, "threads": 0}
