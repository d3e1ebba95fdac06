"""Running the extraction sweep periodically, with Celery beat.

Two ways, both naming the task ``tulip_memory.sweep_extraction_queues``
(:mod:`.sweep`), routed to the queue the workers consume:

* in settings — :func:`beat_schedule_entry` returns the ``CELERY_BEAT_SCHEDULE`` entry::

      CELERY_BEAT_SCHEDULE = {"tulip-memory-sweep": beat_schedule_entry(every=60.0)}

  (the literal dict is in docs/manager.md);
* in the database, for projects whose beat runs django-celery-beat's
  ``DatabaseScheduler`` — :func:`schedule_sweep_in_database` creates or updates the
  periodic task (extra ``beat``: ``pip install 'tulip-memory[beat]'``; without it, the
  call raises an ImportError naming the extra, and nothing else needs it).

A sweep message expires after one interval: while no worker runs, beat's sweeps do not
pile up in the broker.
"""

from __future__ import annotations

import math
from typing import Any

from tulip_memory.manager.extraction.task_names import SWEEP_EXTRACTION_QUEUES

__all__ = ["SWEEP_PERIODIC_TASK_NAME", "beat_schedule_entry", "schedule_sweep_in_database"]

# The name of the django-celery-beat periodic task schedule_sweep_in_database manages.
SWEEP_PERIODIC_TASK_NAME = "tulip_memory: sweep extraction queues"


def _interval(every: object, *, whole: bool) -> float:
    kind = "a whole number of seconds >= 1" if whole else "a number of seconds > 0"
    if (
        isinstance(every, bool)
        or not isinstance(every, (int, float))
        or not math.isfinite(every)
        or every <= 0
        or (whole and (every < 1 or every != int(every)))
    ):
        raise ValueError(f"the sweep interval must be {kind}, got {every!r}")
    return float(every)


def beat_schedule_entry(every: float = 60.0, queue: str = "tulip_memory") -> dict[str, Any]:
    """A ``CELERY_BEAT_SCHEDULE`` entry running the sweep every ``every`` seconds on
    ``queue`` (``TULIP_MEMORY["CELERY_QUEUE"]``: the queue the workers consume)."""
    seconds = _interval(every, whole=False)
    if not isinstance(queue, str) or not queue.strip():
        raise ValueError(f"queue must be a non-empty string, got {queue!r}")
    return {
        "task": SWEEP_EXTRACTION_QUEUES,
        "schedule": seconds,
        "options": {"queue": queue, "expires": seconds},
    }


def schedule_sweep_in_database(every: int = 60, queue: str | None = None) -> Any:
    """Create or update django-celery-beat's periodic task of the sweep; return it.

    ``every``: whole seconds (django-celery-beat's intervals are integers); ``queue``
    defaults to ``TULIP_MEMORY["CELERY_QUEUE"]``. Idempotent: call it from a data
    migration or a deploy step; a second call with another interval updates the task.
    """
    from tulip_memory.conf import settings
    from tulip_memory.optional_dependencies import import_optional

    seconds = int(_interval(every, whole=True))
    entry = beat_schedule_entry(seconds, settings.CELERY_QUEUE if queue is None else queue)
    beat = import_optional(
        "django_celery_beat.models", "beat", needed_by="schedule_sweep_in_database"
    )
    interval, _ = beat.IntervalSchedule.objects.get_or_create(
        every=seconds, period=beat.IntervalSchedule.SECONDS
    )
    task, _ = beat.PeriodicTask.objects.update_or_create(
        name=SWEEP_PERIODIC_TASK_NAME,
        defaults={
            "task": entry["task"],
            "interval": interval,
            # One kind of schedule per task: a crontab set on it by hand is replaced.
            "crontab": None,
            "solar": None,
            "clocked": None,
            "one_off": False,
            "queue": entry["options"]["queue"],
            "expires": None,
            "expire_seconds": seconds,
            "enabled": True,
        },
    )
    return task
