"""Celery tasks of tulip_memory (autodiscovered): the extraction queue run and the periodic
sweeps. Route them to ``TULIP_MEMORY["CELERY_QUEUE"]``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from celery import Task, shared_task
from celery.signals import worker_init
from django.db import InterfaceError, OperationalError

from tulip_memory.core.task_names import (
    CLEANUP_EXTRACTION_JOBS,
    PRUNE_CHECKPOINTS,
    RUN_EXTRACTION_QUEUE,
    SWEEP_EXPIRED_ITEMS,
    SWEEP_EXTRACTION_QUEUES,
)
from tulip_memory.exceptions import SweepError
from tulip_memory.manager.extraction.queue import resend_stalled_queues, send_run_task
from tulip_memory.manager.extraction.worker import run_queue

logger = logging.getLogger("tulip_memory.tasks")

__all__ = [
    "cleanup_extraction_jobs",
    "prune_checkpoints",
    "run_extraction_queue",
    "sweep_expired_items",
    "sweep_extraction_queues",
]


@worker_init.connect(dispatch_uid="tulip_memory.tasks.refuse_broken_manager_settings")
def refuse_broken_manager_settings(**kwargs: Any) -> None:
    """Stop a starting Celery worker (``SystemExit``, status 1) whose ``TULIP_MEMORY`` fails
    the manager's (and its chat model's) system checks, with their list (the exit
    message, on stderr)."""
    from tulip_memory.checks.manager import worker_start_errors

    errors = worker_start_errors()
    if not errors:
        return
    listed = "\n".join(
        f"  {error.id}: {error.msg}" + (f" (HINT: {error.hint})" if error.hint else "")
        for error in errors
    )
    report = (
        "tulip_memory: this Celery worker refuses to start: the settings it builds its "
        "memory manager and chat model from fail the system checks (manage.py check):\n"
        f"{listed}"
    )
    if any(error.id == "tulip_memory.E052" for error in errors):
        report += (
            "\nThe chat model's API key is read from this worker's environment, not the "
            "web process's: set the variable where the worker runs."
        )
    # The list goes with the exit (stderr: Celery's logging is not set up yet); the log,
    # where the project's logging sends it, gets one line.
    logger.critical(
        "this Celery worker refuses to start: TULIP_MEMORY fails the system checks %s",
        ", ".join(sorted({str(error.id) for error in errors})),
    )
    raise SystemExit(report)


@shared_task(
    name=RUN_EXTRACTION_QUEUE,
    bind=True,
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=10,
)
def run_extraction_queue(self: Task, tenant: str, queue_id: int) -> None:
    """Run the open jobs of the queue; a database error is retried (see the module)."""
    # On the last retry a database error counts as the job's failed attempt: bounded.
    last_try = self.max_retries is not None and self.request.retries >= self.max_retries
    outcome = run_queue(tenant, queue_id, charge_database_errors=last_try)
    if outcome.retry_in is not None:
        # A retry delay of the head job, or the lease expiry of a worker that may be dead.
        send_run_task(tenant, queue_id, countdown=outcome.retry_in + 0.05)


@shared_task(name=SWEEP_EXTRACTION_QUEUES, ignore_result=True)
def sweep_extraction_queues() -> int:
    """Send one run message to every stalled extraction queue; how many were sent."""
    return resend_stalled_queues()


@shared_task(name=SWEEP_EXPIRED_ITEMS)
def sweep_expired_items() -> int:
    """Delete the expired items of ``TULIP_MEMORY["STORE"]``; how many.

    For PgMemory (or a subclass) every tenant of its database alias
    (``STORE_OPTIONS["using"]``), without building an encoder; any other store with
    ``capabilities.ttl`` is built from the settings and swept; others have nothing to do.
    """
    from tulip_memory.conf import settings
    from tulip_memory.manager.factory import build_store_from_settings
    from tulip_memory.retention.expiry import sweep_expired_items as sweep
    from tulip_memory.store.pg.store import PgMemory

    factory = settings.import_setting("STORE")
    if isinstance(factory, type) and issubclass(factory, PgMemory):
        return sum(sweep(settings.STORE_OPTIONS.get("using", "default")).values())
    store = build_store_from_settings()

    async def run() -> int:
        try:
            return await store.sweep_expired() if store.capabilities.ttl else 0
        finally:
            await store.close()

    return async_to_sync(run)()


def _on_each_database(
    sweep: str, reports_of: Callable[[str], dict[str, Any]], *fields: str
) -> dict[str, Any]:
    """``reports_of(alias)`` (per tenant) on every alias of ``SWEEP_DATABASES``: the sums of
    the reports' ``fields``, in total and per alias."""
    from tulip_memory.retention.policy import sweep_databases

    done: dict[str, dict[str, int]] = {}
    failed: dict[str, str] = {}
    for alias in sweep_databases():
        try:
            reports = reports_of(alias).values()
            done[alias] = {field: sum(getattr(r, field) for r in reports) for field in fields}
        except Exception as exc:
            logger.exception("the %s sweep failed on database %r", sweep, alias)
            failed[alias] = f"{type(exc).__name__}: {exc}"
    if failed:
        raise SweepError(sweep, failed, done)
    totals = {field: sum(counts[field] for counts in done.values()) for field in fields}
    return {**totals, "databases": done}


@shared_task(name=CLEANUP_EXTRACTION_JOBS)
def cleanup_extraction_jobs() -> dict[str, Any]:
    """Apply the extraction-job retention to every tenant of each ``SWEEP_DATABASES``
    alias; payloads purged, rows deleted."""
    from tulip_memory.retention.jobs import cleanup_jobs

    return _on_each_database("extraction jobs", cleanup_jobs, "purged", "deleted")


@shared_task(name=PRUNE_CHECKPOINTS)
def prune_checkpoints() -> dict[str, Any]:
    """Apply the checkpoint retention to every tenant of each ``SWEEP_DATABASES`` alias;
    checkpoints and threads removed."""
    from tulip_memory.retention.checkpoints import prune_checkpoints as prune

    return _on_each_database("checkpoints", prune, "checkpoints", "threads")
