"""Periodic Celery tasks, one way for every sweep: a ``CELERY_BEAT_SCHEDULE`` entry, or a
django-celery-beat ``PeriodicTask`` row.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["beat_entry", "beat_models", "schedule_in_database", "validate_interval"]


def validate_interval(every: object, *, whole: bool) -> float:
    """``every`` as seconds; ``ValueError`` naming "the sweep interval" when unusable."""
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


def beat_entry(task: str, every: float, queue: str) -> dict[str, Any]:
    """A ``CELERY_BEAT_SCHEDULE`` entry running ``task`` every ``every`` seconds on ``queue``."""
    seconds = validate_interval(every, whole=False)
    if not isinstance(queue, str) or not queue.strip():
        raise ValueError(f"queue must be a non-empty string, got {queue!r}")
    return {"task": task, "schedule": seconds, "options": {"queue": queue, "expires": seconds}}


def beat_models() -> Any:
    """django-celery-beat's models, once it is installed, in ``INSTALLED_APPS`` and
    migrated; otherwise ImportError (naming the extra) or ConfigurationError (naming the
    setting or the migration). Reads the catalog only: a dry run makes the same checks."""
    from django.apps import apps
    from django.db import connections, router

    from tulip_memory.core.optional_dependencies import import_optional
    from tulip_memory.exceptions import ConfigurationError

    import_optional(
        "django_celery_beat", "beat", needed_by="Keeping the sweep schedule in the database"
    )
    if not apps.is_installed("django_celery_beat"):
        raise ConfigurationError(
            "django-celery-beat is installed but 'django_celery_beat' is not in "
            "INSTALLED_APPS: add it, run `manage.py migrate django_celery_beat "
            "--database=owner`, and run beat with `--scheduler "
            "django_celery_beat.schedulers:DatabaseScheduler`"
        )
    beat = import_optional(
        "django_celery_beat.models", "beat", needed_by="Keeping the sweep schedule in the database"
    )
    alias = router.db_for_write(beat.PeriodicTask)
    table = beat.PeriodicTask._meta.db_table
    if table not in connections[alias].introspection.table_names():
        raise ConfigurationError(
            f"django-celery-beat's tables are missing from database {alias!r} (no {table}): "
            "run `manage.py migrate django_celery_beat` as the role that owns the tables "
            "(e.g. --database=owner)"
        )
    return beat


def schedule_in_database(name: str, task: str, every: int, queue: str | None = None) -> Any:
    """Create or update (idempotent) django-celery-beat's periodic task ``name`` running
    ``task`` every ``every`` whole seconds on ``queue`` (default: ``CELERY_QUEUE``)."""
    from tulip_memory.conf import settings

    seconds = int(validate_interval(every, whole=True))
    entry = beat_entry(task, seconds, settings.CELERY_QUEUE if queue is None else queue)
    beat = beat_models()
    # IntervalSchedule has no unique constraint: rows made by hand or by another app may
    # repeat an interval, and any of them will do.
    same = {"every": seconds, "period": beat.IntervalSchedule.SECONDS}
    interval = beat.IntervalSchedule.objects.filter(**same).order_by(
        "pk"
    ).first() or beat.IntervalSchedule.objects.create(**same)
    periodic, _ = beat.PeriodicTask.objects.update_or_create(
        name=name,
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
    return periodic
