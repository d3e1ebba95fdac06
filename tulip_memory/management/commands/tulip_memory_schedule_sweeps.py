"""``manage.py tulip_memory_schedule_sweeps``: one django-celery-beat ``PeriodicTask`` per
sweep (:mod:`tulip_memory.retention.sweeps`); idempotent, run it on every deploy.
"""

from __future__ import annotations

import pprint
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.retention.beat import beat_models
from tulip_memory.retention.policy import sweep_intervals
from tulip_memory.retention.sweeps import (
    SWEEPS,
    beat_schedule,
    chosen_sweeps,
    schedule_sweeps_in_database,
)


class Command(BaseCommand):
    help = (
        "Create or update the django-celery-beat periodic tasks of every tulip_memory sweep "
        "(intervals: TULIP_MEMORY['SWEEP_INTERVALS']), or print the CELERY_BEAT_SCHEDULE."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        keys = [sweep.key for sweep in SWEEPS]
        parser.add_argument("--queue", help="The Celery queue (default: CELERY_QUEUE).")
        parser.add_argument(
            "--only", action="append", choices=keys, help="Only this sweep (repeatable)."
        )
        parser.add_argument(
            "--print-settings",
            action="store_true",
            help="Print the CELERY_BEAT_SCHEDULE of the sweeps; write nothing.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="List what would be written; write nothing."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        queue = options["queue"]
        if queue is not None and not queue.strip():
            raise CommandError("--queue must not be blank")
        only = tuple(options["only"]) if options["only"] else None
        try:
            intervals = sweep_intervals()
            if options["print_settings"]:
                schedule = beat_schedule(queue, only=only)
                self.stdout.write("CELERY_BEAT_SCHEDULE = " + pprint.pformat(schedule))
                return
            if options["dry_run"]:
                beat_models()  # what the real run needs, checked without writing
                for sweep in chosen_sweeps(only):
                    self.stdout.write(
                        f"Would schedule {sweep.periodic_task_name!r}: {sweep.task} every "
                        f"{intervals[sweep.key]} s ({sweep.summary})"
                    )
                return
            tasks = schedule_sweeps_in_database(queue, only=only)
        except (ConfigurationError, ValueError, ImportError) as exc:
            raise CommandError(str(exc)) from exc
        for task in tasks:
            self.stdout.write(
                f"Scheduled {task.name!r}: {task.task} every {task.interval.every} s "
                f"on queue {task.queue!r}"
            )
        self.stdout.write(self.style.SUCCESS(f"{len(tasks)} sweep(s) scheduled."))
