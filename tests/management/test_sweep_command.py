"""The sweep commands on good and bad input: ``tulip_memory_sweep_expired``,
``tulip_memory_cleanup_jobs``, ``tulip_memory_prune_checkpoints`` and
``tulip_memory_schedule_sweeps``."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.db import connections
from django.db.models.functions import Now

from tests.backends.test_contract import make_state
from tulip_memory.backends import MySQLCheckpointer
from tulip_memory.core.clock import ManualClock, utc_now
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.models import DeltaCheckpointRecord, ExtractionJob, JobState, MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])


def run(name: str, *args: str) -> str:
    out = StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def _expired_items() -> None:
    store = PgMemory(clock=ManualClock(utc_now() - timedelta(hours=1)))
    async_to_sync(store.put_batch)([(("acme", "n"), f"k{i}", i, None) for i in range(3)], ttl=1)
    async_to_sync(store.put)(("globex", "n"), "k", 1, ttl=1)
    async_to_sync(store.put)(("globex", "n"), "kept", 1)


def _count(tenant: str) -> int:
    with tenant_atomic(tenant):
        return MemoryItem.objects.count()


def test_sweep_expired_dry_run_then_for_real():
    _expired_items()
    out = run("tulip_memory_sweep_expired", "--all-tenants", "--dry-run")
    assert "Tenant 'acme': 3 expired item(s)" in out and "Tenant 'globex': 1 expired" in out
    assert "[" + "#" * 30 + "] 2/2" in out
    assert "Dry run, nothing written: would remove 4 expired item(s) in 2 tenant(s)." in out
    assert (_count("acme"), _count("globex")) == (3, 2)
    out = run("tulip_memory_sweep_expired", "--tenant", "globex")
    assert "Removed 1 expired item(s) in 1 tenant(s)." in out
    assert (_count("acme"), _count("globex")) == (3, 1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Name the tenants"),
        (("--tenant", ""), "Name the tenants"),
        (("--tenant", "a" * 300), "Tenant 'a+' is not valid"),
        (("--tenant", "acme", "--database", "mysql"), "is mysql; this command works on postgresql"),
        (("--tenant", "acme", "--database", "nope"), "no such alias"),
    ],
)
def test_sweep_expired_refuses_bad_input(args, message):
    _expired_items()
    with pytest.raises(CommandError, match=message):
        run("tulip_memory_sweep_expired", *args)
    assert _count("acme") == 3


def _finished_job(tenant: str, state: str, hours_ago: float) -> None:
    with tenant_atomic(tenant):
        job_id, _ = ExtractionJob.objects.enqueue((tenant, "m"), {"messages": ["text"]})
        ExtractionJob.objects.filter(pk=job_id).update(
            state=state, finished_at=Now() - timedelta(hours=hours_ago)
        )


def test_cleanup_jobs_with_options_and_settings(settings):
    _finished_job("acme", JobState.DONE, 48)
    _finished_job("acme", JobState.FAILED, 24 * 40)
    out = run("tulip_memory_cleanup_jobs", "--tenant", "acme", "--payload-after-hours", "24")
    assert "Tenant 'acme': 1 payload(s), 0 job row(s)" in out
    settings.TULIP_MEMORY = {"JOB_DELETE_AFTER_DAYS": 30}
    out = run("tulip_memory_cleanup_jobs", "--all-tenants", "--dry-run")
    assert "would remove 0 payload(s), 1 job row(s) in 1 tenant(s)" in out
    run("tulip_memory_cleanup_jobs", "--all-tenants")
    with tenant_atomic("acme"):
        assert list(ExtractionJob.objects.values_list("state", "payload")) == [("done", {})]


@pytest.mark.parametrize(
    ("tulip_memory", "args", "message"),
    [
        ({}, ("--tenant", "acme"), "Nothing to do"),
        ({}, ("--tenant", "acme", "--payload-after-hours", "-1"), "of hours >= 0, got -1.0"),
        ({}, ("--tenant", "acme", "--delete-after-days", "nan"), "of days >= 0, got nan"),
        ({}, ("--tenant", "acme", "--delete-after-days", "inf"), r"got inf \(at most 36525"),
        ({}, ("--tenant", "acme", "--payload-after-hours", "1e12"), "at most 876600 hours"),
        ({"JOB_DELETE_AFTER_DAYS": -3}, ("--tenant", "acme"), "JOB_DELETE_AFTER_DAYS"),
        ({}, ("--tenant", "acme", "--database", "mysql", "--delete-after-days", "1"), "mysql"),
    ],
)
def test_cleanup_jobs_refuses_bad_input(settings, tulip_memory, args, message):
    settings.TULIP_MEMORY = tulip_memory
    _finished_job("acme", JobState.DONE, 48)
    with pytest.raises(CommandError, match=message):
        run("tulip_memory_cleanup_jobs", *args)
    with tenant_atomic("acme"):
        assert ExtractionJob.objects.with_payload().count() == 1


def test_prune_checkpoints_on_mariadb_and_settings(settings):
    checkpointer = MySQLCheckpointer("mysql", tenant="acme")
    for turn in range(5):
        async_to_sync(checkpointer.save)(make_state(turn), "t")
    settings.TULIP_MEMORY = {"CHECKPOINT_KEEP_LAST": 2}
    out = run("tulip_memory_prune_checkpoints", "--database", "mysql", "--all-tenants", "--dry-run")
    assert "Tenant 'acme': 3 checkpoint(s), 0 idle thread(s)" in out
    out = run("tulip_memory_prune_checkpoints", "--database", "mysql", "--tenant", "acme")
    assert "Removed 3 checkpoint(s), 0 idle thread(s) in 1 tenant(s)." in out
    assert len(async_to_sync(checkpointer.list_checkpoints)("t")) == 2
    run(
        "tulip_memory_prune_checkpoints",
        "--database",
        "mysql",
        "--tenant",
        "acme",
        "--keep-last",
        "1",
    )
    assert len(async_to_sync(checkpointer.list_checkpoints)("t")) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tenant", "acme"), "Nothing to do"),
        (("--tenant", "acme", "--keep-last", "0"), "--keep-last must be >= 1"),
        (("--tenant", "acme", "--idle-days", "0"), "--idle-days must be a number of days > 0"),
        (("--tenant", "acme", "--idle-days", "inf"), r"--idle-days .* got inf \(at most 36525"),
        (("--tenant", "acme", "--keep-last", "x"), "invalid int value"),
        (("--tenant", "nobody", "--keep-last", "1"), r"Unknown tenant\(s\) 'nobody'"),
    ],
)
def test_prune_checkpoints_refuses_bad_input(args, message):
    with pytest.raises(CommandError, match=message):
        run("tulip_memory_prune_checkpoints", *args)


def test_a_failing_tenant_stops_the_command_with_its_name():
    storage = ORMDeltaStorage("default", tenant="broken")
    checkpointer = DeltaCheckpointer(storage, max_chain_depth=5)
    ids = [async_to_sync(checkpointer.save)(make_state(turn), "t") for turn in range(4)]
    with tenant_atomic("broken"):  # damage: the chain of the kept checkpoints loses a link
        DeltaCheckpointRecord.objects.filter(checkpoint_id=ids[1]).delete()
    with pytest.raises(CommandError, match=r"Stopped in tenant 'broken' \(CheckpointCorrupt"):
        run("tulip_memory_prune_checkpoints", "--tenant", "broken", "--keep-last", "1")
    assert len(async_to_sync(checkpointer.list_checkpoints)("t")) == 3  # nothing lost


def test_schedule_sweeps(settings):
    from django_celery_beat.models import PeriodicTask

    settings.TULIP_MEMORY = {"CELERY_QUEUE": "memory"}
    out = run("tulip_memory_schedule_sweeps", "--print-settings", "--only", "checkpoints")
    assert out.startswith("CELERY_BEAT_SCHEDULE = {'tulip-memory-checkpoints'")
    assert "'tulip_memory.prune_checkpoints'" in out
    out = run("tulip_memory_schedule_sweeps", "--dry-run")
    assert out.count("Would schedule") == 4 and not PeriodicTask.objects.exists()
    out = run("tulip_memory_schedule_sweeps")
    assert "4 sweep(s) scheduled." in out
    assert (
        "'tulip_memory: sweep expired items': tulip_memory.sweep_expired_items every 300 s "
        "on queue 'memory'"
    ) in out
    run("tulip_memory_schedule_sweeps", "--only", "expired_items", "--queue", "other")
    assert PeriodicTask.objects.get(name="tulip_memory: sweep expired items").queue == "other"
    assert PeriodicTask.objects.count() == 4


def test_schedule_sweeps_takes_one_of_repeated_intervals(settings):
    """django-celery-beat's intervals are not unique: duplicates made elsewhere are used,
    not refused with MultipleObjectsReturned."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    settings.TULIP_MEMORY = {"SWEEP_INTERVALS": {"expired_items": 60}}
    first, _second = (IntervalSchedule.objects.create(every=60, period="seconds") for _ in "ab")
    run("tulip_memory_schedule_sweeps", "--only", "expired_items")
    task = PeriodicTask.objects.get(name="tulip_memory: sweep expired items")
    assert task.interval == first
    assert IntervalSchedule.objects.filter(every=60).count() == 2


@pytest.mark.parametrize(
    ("tulip_memory", "args", "message"),
    [
        ({}, ("--queue", " "), "--queue must not be blank"),
        ({"SWEEP_INTERVALS": {"checkpoints": 0}}, (), r"\['checkpoints'\] must be a whole"),
        ({}, ("--only", "nope"), "invalid choice"),
    ],
)
def test_schedule_sweeps_refuses_bad_input(settings, tulip_memory, args, message):
    from django_celery_beat.models import PeriodicTask

    settings.TULIP_MEMORY = tulip_memory
    with pytest.raises(CommandError, match=message):
        run("tulip_memory_schedule_sweeps", *args)
    assert not PeriodicTask.objects.exists()


def test_schedule_sweeps_says_when_django_celery_beat_is_not_an_installed_app(settings):
    installed = settings.INSTALLED_APPS
    settings.INSTALLED_APPS = [app for app in installed if app != "django_celery_beat"]
    for dry_run in ((), ("--dry-run",)):  # the dry run makes the real run's checks
        with pytest.raises(CommandError, match=r"'django_celery_beat' is not in INSTALLED_APPS"):
            run("tulip_memory_schedule_sweeps", *dry_run)
    out = run("tulip_memory_schedule_sweeps", "--print-settings")  # needs no beat tables
    assert out.startswith("CELERY_BEAT_SCHEDULE = ")


class BeatOnMariaDB:
    """A database router sending django-celery-beat's models to the ``mysql`` alias."""

    def db_for_write(self, model, **hints):
        return "mysql" if model._meta.app_label == "django_celery_beat" else None


def test_schedule_sweeps_says_which_migration_to_run_when_beats_tables_are_missing(settings):
    from django_celery_beat.models import PeriodicTask

    settings.DATABASE_ROUTERS = [f"{__name__}.BeatOnMariaDB"]
    with connections["mysql"].cursor() as cursor:  # a real database without the table
        cursor.execute(
            "RENAME TABLE django_celery_beat_periodictask TO django_celery_beat_periodictask_away"
        )
    try:
        with pytest.raises(CommandError) as raised:
            run("tulip_memory_schedule_sweeps")
        with pytest.raises(CommandError) as dry:
            run("tulip_memory_schedule_sweeps", "--dry-run")
    finally:
        with connections["mysql"].cursor() as cursor:
            cursor.execute(
                "RENAME TABLE django_celery_beat_periodictask_away TO "
                "django_celery_beat_periodictask"
            )
    assert str(raised.value) == (
        "django-celery-beat's tables are missing from database 'mysql' (no "
        "django_celery_beat_periodictask): run `manage.py migrate django_celery_beat` as the "
        "role that owns the tables (e.g. --database=owner)"
    )
    assert str(dry.value) == str(raised.value)
    assert not PeriodicTask.objects.using("mysql").exists()
