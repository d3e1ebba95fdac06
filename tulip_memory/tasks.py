"""Celery tasks of tulip_memory (autodiscovered by a project's Celery app).

``run_extraction_queue(tenant, queue_id)`` runs the open extraction jobs of one memory
namespace, in order, under a lease (:mod:`tulip_memory.manager.worker`). Its
message carries no work: duplicates, redeliveries and reordering change nothing. Route
it to ``TULIP_MEMORY["CELERY_QUEUE"]`` (the manager sends it there) and start workers
with ``celery -A <project> worker -Q <that queue>``.

``sweep_extraction_queues()`` re-sends the message of every namespace that has runnable
jobs nobody works on (:mod:`tulip_memory.manager.extraction.sweep`); run it on a beat
schedule (:mod:`tulip_memory.manager.extraction.schedule`).
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from tulip_memory.manager.extraction.queue import send_run_task
from tulip_memory.manager.extraction.sweep import resend_stalled_queues
from tulip_memory.manager.extraction.task_names import (
    RUN_EXTRACTION_QUEUE,
    SWEEP_EXTRACTION_QUEUES,
)
from tulip_memory.manager.worker import run_queue

__all__ = ["run_extraction_queue", "sweep_extraction_queues"]


@shared_task(
    name=RUN_EXTRACTION_QUEUE,
    ignore_result=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=10,
)
def run_extraction_queue(tenant: str, queue_id: int) -> None:
    outcome = run_queue(tenant, queue_id)
    if outcome.retry_in is not None:
        # A retry delay of the head job, or the lease expiry of a worker that may be dead.
        send_run_task(tenant, queue_id, countdown=outcome.retry_in + 0.05)


@shared_task(name=SWEEP_EXTRACTION_QUEUES, ignore_result=True)
def sweep_extraction_queues() -> int:
    """Send one run message to every stalled extraction queue; how many were sent."""
    return resend_stalled_queues()
