"""The sweep tasks of tulip_memory.tasks, run in this process (``apply``); a real worker
runs the expiry sweep in tests/manager/test_sweep_tasks_on_workers.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from tests.backends.test_contract import make_state
from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.core.clock import ManualClock, utc_now
from tulip_memory.exceptions import SweepError
from tulip_memory.models import ExtractionJob, JobState, Tenant
from tulip_memory.store import HolographicStore, PgMemory
from tulip_memory.tasks import cleanup_extraction_jobs, prune_checkpoints, sweep_expired_items
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])


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
    assert cleanup_extraction_jobs.apply().get() == {
        "purged": 1,
        "deleted": 0,
        "databases": {"default": {"purged": 1, "deleted": 0}},
    }
    checkpointer = PostgreSQLCheckpointer(tenant="acme")
    for turn in range(3):
        async_to_sync(checkpointer.save)(make_state(turn), "t")
    assert prune_checkpoints.apply().get() == {
        "checkpoints": 2,
        "threads": 0,
        "databases": {"default": {"checkpoints": 2, "threads": 0}},
    }


def _three_checkpoints(checkpointer, thread="t"):
    for turn in range(3):
        async_to_sync(checkpointer.save)(make_state(turn), thread)


def test_the_sweeps_work_on_every_database_of_sweep_databases(settings):
    settings.TULIP_MEMORY = {"CHECKPOINT_KEEP_LAST": 1, "SWEEP_DATABASES": ["default", "mysql"]}
    _three_checkpoints(PostgreSQLCheckpointer(tenant="acme"))
    _three_checkpoints(MySQLCheckpointer("mysql", tenant="acme"))
    assert prune_checkpoints.apply().get() == {
        "checkpoints": 4,
        "threads": 0,
        "databases": {
            "default": {"checkpoints": 2, "threads": 0},
            "mysql": {"checkpoints": 2, "threads": 0},
        },
    }


def test_a_failing_database_is_reported_and_the_others_are_still_swept(settings, caplog):
    settings.TULIP_MEMORY = {"CHECKPOINT_KEEP_LAST": 1, "SWEEP_DATABASES": ["mysql", "default"]}
    _three_checkpoints(PostgreSQLCheckpointer(tenant="acme"))
    mysql = MySQLCheckpointer("mysql", tenant="acme")
    _three_checkpoints(mysql)
    Tenant.objects.using("mysql").get_or_create(name="acme")
    with connections["mysql"].cursor() as cursor:  # a real failure: the table is not there
        cursor.execute("RENAME TABLE tulip_memory_checkpoint TO tulip_memory_checkpoint_away")
    try:
        with pytest.raises(SweepError) as raised:
            prune_checkpoints.apply(throw=True)
    finally:
        with connections["mysql"].cursor() as cursor:
            cursor.execute("RENAME TABLE tulip_memory_checkpoint_away TO tulip_memory_checkpoint")
    assert list(raised.value.failed) == ["mysql"]
    assert "tulip_memory_checkpoint" in raised.value.failed["mysql"]
    assert raised.value.done == {"default": {"checkpoints": 2, "threads": 0}}  # still swept
    assert "the checkpoints sweep failed on database 'mysql'" in caplog.text
    assert len(async_to_sync(mysql.list_checkpoints)("t")) == 3  # nothing lost there


@pytest.mark.parametrize(
    "value, problem",
    [
        ("default", "must be a non-empty list"),
        ([], "must be a non-empty list"),
        (["default", "nowhere"], "names ['nowhere']"),
    ],
)
def test_a_bad_sweep_databases_is_named_by_e090_and_the_task_runs_nothing(settings, value, problem):
    from tulip_memory.checks.retention import check_retention_settings
    from tulip_memory.exceptions import ConfigurationError

    settings.TULIP_MEMORY = {"CHECKPOINT_KEEP_LAST": 1, "SWEEP_DATABASES": value}
    checkpointer = PostgreSQLCheckpointer(tenant="acme")
    _three_checkpoints(checkpointer)
    [error] = check_retention_settings()
    assert error.id == "tulip_memory.E090" and problem in error.msg
    with pytest.raises(ConfigurationError, match="SWEEP_DATABASES"):
        prune_checkpoints.apply(throw=True)
    assert len(async_to_sync(checkpointer.list_checkpoints)("t")) == 3


def test_a_worker_refuses_to_start_on_the_managers_check_errors(settings):
    """The ``worker_init`` receiver (a real worker exiting on it: tests/manager/
    extraction/test_worker.py): ``SystemExit`` naming every error, nothing when all is well."""
    from celery.signals import worker_init

    from tulip_memory.tasks import refuse_broken_manager_settings

    assert any(
        receiver() is refuse_broken_manager_settings
        for _key, receiver in worker_init.receivers
        if callable(receiver)
    )
    settings.TULIP_MEMORY = {}
    assert refuse_broken_manager_settings() is None
    settings.TULIP_MEMORY = {
        "EXTRACTOR": "tulip_memory.no_such_module.extract",
        "EXTRACTION_JOB_TIMEOUT_SECONDS": -1,
    }
    with pytest.raises(SystemExit) as stopped:
        refuse_broken_manager_settings()
    message = str(stopped.value.code)
    assert message.startswith("tulip_memory: this Celery worker refuses to start")
    assert "tulip_memory.E041: TULIP_MEMORY['EXTRACTOR'] cannot be imported" in message
    assert "tulip_memory.E043: TULIP_MEMORY['EXTRACTION_JOB_TIMEOUT_SECONDS']" in message


def test_a_worker_refuses_to_start_without_its_chat_models_api_key(settings, monkeypatch):
    """No key in the worker's environment for a remote model: every job would fail."""
    from tulip_memory.tasks import refuse_broken_manager_settings

    monkeypatch.delenv("TULIP_TEST_NO_SUCH_KEY", raising=False)
    settings.TULIP_MEMORY = {
        "LLM": {"MODEL": "gpt-4o-mini", "API_KEY_ENV": "TULIP_TEST_NO_SUCH_KEY"},
    }
    with pytest.raises(SystemExit) as stopped:
        refuse_broken_manager_settings()
    message = str(stopped.value.code)
    assert message.startswith("tulip_memory: this Celery worker refuses to start")
    assert (
        "tulip_memory.E052: no API key for https://api.openai.com/v1: the environment "
        "variable TULIP_TEST_NO_SUCH_KEY is unset or empty"
    ) in message
    assert "read from this worker's environment" in message
    monkeypatch.setenv("TULIP_TEST_NO_SUCH_KEY", "sk-test")
    assert refuse_broken_manager_settings() is None
