"""Every sweep on Celery beat: the CELERY_BEAT_SCHEDULE dict and django-celery-beat rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.retention.sweeps import SWEEPS, beat_schedule, schedule_sweeps_in_database

ROOT = Path(__file__).resolve().parents[2]


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


def _load_beat_settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Django's settings from tests/beat_settings.py, loaded as Django loads them."""
    code = (
        "import json; from django.conf import settings; "
        "print(json.dumps(settings.CELERY_BEAT_SCHEDULE))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.beat_settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_beat_schedule_built_in_settings_py_takes_the_projects_queue_and_intervals():
    result = _load_beat_settings()
    assert result.returncode == 0, result.stderr
    schedule = json.loads(result.stdout)
    assert {entry["options"]["queue"] for entry in schedule.values()} == {"trial_ops_mem"}
    assert schedule["tulip-memory-expired-items"]["schedule"] == 30.0
    assert schedule["tulip-memory-checkpoints"]["schedule"] == 3600.0  # the default


def test_the_beat_schedule_refuses_to_guess_before_the_settings_are_configured():
    result = _load_beat_settings(TULIP_BEAT_CALL="bare")
    assert result.returncode == 1
    assert "ConfigurationError: beat_schedule() cannot read TULIP_MEMORY before Django's" in (
        result.stderr
    )
    assert "beat_schedule(tulip_memory=TULIP_MEMORY)" in result.stderr


def test_the_beat_schedule_of_a_given_dict(settings):
    settings.TULIP_MEMORY = {"CELERY_QUEUE": "configured"}
    schedule = beat_schedule(tulip_memory={"CELERY_QUEUE": "given"})
    assert {entry["options"]["queue"] for entry in schedule.values()} == {"given"}
    with pytest.raises(ConfigurationError, match="must be a dict, got list"):
        beat_schedule(tulip_memory=[])  # type: ignore[arg-type]
