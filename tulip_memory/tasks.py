"""Celery tasks of tulip_memory (autodiscovered by a project's Celery app).

``run_extraction_queue(tenant, queue_id)`` runs the open extraction jobs of one memory
namespace, in order, under a lease (:mod:`tulip_memory.manager.worker`). Its
message carries no work: duplicates, redeliveries and reordering change nothing. Route
it to ``TULIP_MEMORY["CELERY_QUEUE"]`` (the manager sends it there) and start workers
with ``celery -A <project> worker -Q <that queue>``.
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from tulip_memory.manager.extraction.queue import send_run_task
from tulip_memory.manager.extraction.task_names import RUN_EXTRACTION_QUEUE
from tulip_memory.manager.worker import run_queue

__all__ = ["run_extraction_queue"]


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
