"""Every periodic sweep of tulip_memory (one per ``SWEEP_INTERVALS`` key), and scheduling
them on Celery beat: all of them, or the extraction sweep alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tulip_memory.core.task_names import (
    CLEANUP_EXTRACTION_JOBS,
    PRUNE_CHECKPOINTS,
    SWEEP_EXPIRED_ITEMS,
    SWEEP_EXTRACTION_QUEUES,
)
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.retention.beat import beat_entry, schedule_in_database
from tulip_memory.retention.policy import sweep_intervals

__all__ = [
    "SWEEPS",
    "SWEEP_PERIODIC_TASK_NAME",
    "Sweep",
    "beat_schedule",
    "beat_schedule_entry",
    "chosen_sweeps",
    "schedule_sweep_in_database",
    "schedule_sweeps_in_database",
]

# The django-celery-beat periodic task of the extraction sweep.
SWEEP_PERIODIC_TASK_NAME = "tulip_memory: sweep extraction queues"


@dataclass(frozen=True)
class Sweep:
    """One periodic sweep: its ``SWEEP_INTERVALS`` key, task and periodic-task name."""

    key: str
    task: str
    periodic_task_name: str
    summary: str


SWEEPS = (
    Sweep(
        "extraction_queues",
        SWEEP_EXTRACTION_QUEUES,
        SWEEP_PERIODIC_TASK_NAME,
        "re-send the message of stalled extraction queues",
    ),
    Sweep(
        "expired_items",
        SWEEP_EXPIRED_ITEMS,
        "tulip_memory: sweep expired items",
        "delete the store items whose ttl has passed",
    ),
    Sweep(
        "extraction_jobs",
        CLEANUP_EXTRACTION_JOBS,
        "tulip_memory: clean up extraction jobs",
        "purge finished jobs' payloads, delete old finished jobs",
    ),
    Sweep(
        "checkpoints",
        PRUNE_CHECKPOINTS,
        "tulip_memory: prune checkpoints",
        "keep the newest checkpoints per thread, drop idle threads",
    ),
)


def _queue(queue: str | None, source: Any = None) -> str:
    from tulip_memory.conf import settings

    return (settings if source is None else source).CELERY_QUEUE if queue is None else queue


def _settings_for_beat(tulip_memory: dict[str, Any] | None) -> Any:
    """The settings :func:`beat_schedule` reads: the dict given, or the project's once
    Django's settings are configured (refused before: they would be the defaults)."""
    from django.conf import settings as django_settings

    from tulip_memory.conf import settings, settings_of

    if tulip_memory is not None:
        try:
            return settings_of(tulip_memory)
        except TypeError as exc:
            raise ConfigurationError(f"beat_schedule(tulip_memory=...): {exc}") from None
    if not django_settings.configured:
        raise ConfigurationError(
            "beat_schedule() cannot read TULIP_MEMORY before Django's settings are "
            "configured (it was called from settings.py, or outside Django): its queue and "
            "intervals would be the defaults. Pass the dict: "
            "CELERY_BEAT_SCHEDULE = beat_schedule(tulip_memory=TULIP_MEMORY)."
        )
    return settings


def chosen_sweeps(only: tuple[str, ...] | None = None) -> list[Sweep]:
    """The sweeps whose keys are in ``only`` (all when None), in :data:`SWEEPS` order."""
    keys = {sweep.key for sweep in SWEEPS}
    unknown = sorted(set(only or ()) - keys)
    if unknown:
        raise ValueError(f"unknown sweeps {unknown}; the sweeps are {sorted(keys)}")
    return [sweep for sweep in SWEEPS if only is None or sweep.key in only]


def beat_schedule(
    queue: str | None = None,
    *,
    only: tuple[str, ...] | None = None,
    tulip_memory: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """``CELERY_BEAT_SCHEDULE`` entries of the sweeps (``"tulip-memory-<key>"``), their
    queue and intervals read from ``tulip_memory`` (the project's ``TULIP_MEMORY`` dict, to
    pass in settings.py), else from the configured settings."""
    source = _settings_for_beat(tulip_memory)
    intervals = sweep_intervals(source)
    return {
        f"tulip-memory-{sweep.key.replace('_', '-')}": beat_entry(
            sweep.task, intervals[sweep.key], _queue(queue, source)
        )
        for sweep in chosen_sweeps(only)
    }


def schedule_sweeps_in_database(
    queue: str | None = None, *, only: tuple[str, ...] | None = None
) -> list[Any]:
    """Create or update the django-celery-beat periodic task of each sweep (``only``:
    those keys); the tasks, in :data:`SWEEPS` order. Idempotent."""
    intervals = sweep_intervals()
    return [
        schedule_in_database(
            sweep.periodic_task_name, sweep.task, intervals[sweep.key], _queue(queue)
        )
        for sweep in chosen_sweeps(only)
    ]


def beat_schedule_entry(every: float = 60.0, queue: str = "tulip_memory") -> dict[str, Any]:
    """A ``CELERY_BEAT_SCHEDULE`` entry running the extraction sweep every ``every`` seconds
    on ``queue`` (``TULIP_MEMORY["CELERY_QUEUE"]``: the queue the workers consume)."""
    return beat_entry(SWEEP_EXTRACTION_QUEUES, every, queue)


def schedule_sweep_in_database(every: int = 60, queue: str | None = None) -> Any:
    """Create or update (idempotent) django-celery-beat's periodic task of the extraction
    sweep, every ``every`` whole seconds; return it."""
    return schedule_in_database(SWEEP_PERIODIC_TASK_NAME, SWEEP_EXTRACTION_QUEUES, every, queue)
