"""Running the extraction sweep (``tulip_memory.sweep_extraction_queues``) periodically
with Celery beat.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.core.task_names import SWEEP_EXTRACTION_QUEUES
from tulip_memory.retention.beat import beat_entry, schedule_in_database

__all__ = ["SWEEP_PERIODIC_TASK_NAME", "beat_schedule_entry", "schedule_sweep_in_database"]

# The name of the django-celery-beat periodic task schedule_sweep_in_database manages.
SWEEP_PERIODIC_TASK_NAME = "tulip_memory: sweep extraction queues"


def beat_schedule_entry(every: float = 60.0, queue: str = "tulip_memory") -> dict[str, Any]:
    """A ``CELERY_BEAT_SCHEDULE`` entry running the sweep every ``every`` seconds on
    ``queue`` (``TULIP_MEMORY["CELERY_QUEUE"]``: the queue the workers consume)."""
    return beat_entry(SWEEP_EXTRACTION_QUEUES, every, queue)


def schedule_sweep_in_database(every: int = 60, queue: str | None = None) -> Any:
    """Create or update django-celery-beat's periodic task of the sweep; return it.

    ``every``: whole seconds (django-celery-beat's intervals are integers); ``queue``
    defaults to ``TULIP_MEMORY["CELERY_QUEUE"]``. Idempotent: call it from a data
    migration or a deploy step; a second call with another interval updates the task.
    """
    return schedule_in_database(SWEEP_PERIODIC_TASK_NAME, SWEEP_EXTRACTION_QUEUES, every, queue)
