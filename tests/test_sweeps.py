"""Every sweep on Celery beat: the CELERY_BEAT_SCHEDULE dict and django-celery-beat rows."""

from __future__ import annotations

import pytest

from tulip_memory.sweeps import SWEEPS, beat_schedule, schedule_sweeps_in_database


def test_the_beat_schedule_of_every_sweep(settings):
    settings.TULIP_MEMORY = {"CELERY_QUEUE": "memory", "SWEEP_INTERVALS": {"checkpoints": 900}}
    schedule = beat_schedule()
    assert schedule == {
        "tulip-memory-extraction-queues": {
            "task": "tulip_memory.sweep_extraction_queues",
            "schedule": 60.0,
            "options": {"queue": "memory", "expires": 60.0},
        },
        "tulip-memory-expired-items": {
            "task": "tulip_memory.sweep_expired_items",
            "schedule": 300.0,
            "options": {"queue": "memory", "expires": 300.0},
        },
        "tulip-memory-extraction-jobs": {
            "task": "tulip_memory.cleanup_extraction_jobs",
            "schedule": 3600.0,
            "options": {"queue": "memory", "expires": 3600.0},
        },
        "tulip-memory-checkpoints": {
            "task": "tulip_memory.prune_checkpoints",
            "schedule": 900.0,
            "options": {"queue": "memory", "expires": 900.0},
        },
    }
    assert list(beat_schedule("other", only=("checkpoints",))) == ["tulip-memory-checkpoints"]
    with pytest.raises(ValueError, match=r"unknown sweeps \['nope'\]"):
        beat_schedule(only=("nope",))


def test_every_sweep_task_is_registered():
    from tulip_memory import tasks

    registered = {
        getattr(tasks, name).name for name in tasks.__all__ if hasattr(getattr(tasks, name), "name")
    }
    assert {sweep.task for sweep in SWEEPS} <= registered


@pytest.mark.django_db
def test_the_sweeps_kept_in_django_celery_beat(settings):
    from django_celery_beat.models import PeriodicTask

    settings.TULIP_MEMORY = {"CELERY_QUEUE": "memory"}
    tasks = schedule_sweeps_in_database()
    assert [(t.name, t.task, t.interval.every, t.queue, t.expire_seconds) for t in tasks] == [
        (s.periodic_task_name, s.task, every, "memory", every)
        for s, every in zip(SWEEPS, [60, 300, 3600, 3600], strict=True)
    ]
    settings.TULIP_MEMORY = {"CELERY_QUEUE": "memory", "SWEEP_INTERVALS": {"expired_items": 30}}
    [again] = schedule_sweeps_in_database(only=("expired_items",))  # idempotent: updated
    assert PeriodicTask.objects.filter(name__startswith="tulip_memory: ").count() == 4
    assert (again.pk, again.interval.every) == (tasks[1].pk, 30)
    with pytest.raises(ValueError, match="unknown sweeps"):
        schedule_sweeps_in_database(only=("nope",))
