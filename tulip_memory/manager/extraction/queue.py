"""``extract_mode="celery"``, the caller's side: insert the job row in a transaction pinned
to the tenant, send the Celery message on commit; and the sweep re-sending the message of a
namespace left without one (docs/design/extraction.md).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Any

from asgiref.sync import sync_to_async

from tulip_memory.core.task_names import RUN_EXTRACTION_QUEUE
from tulip_memory.messages import Message

__all__ = ["SEND_RETRY_POLICY", "CeleryExtractions", "resend_stalled_queues", "send_run_task"]

Namespace = tuple[str, ...]

logger = logging.getLogger("tulip_memory.manager.extraction")

# How often drain() re-sends the task of a namespace nobody is working on (seconds).
_KICK_INTERVAL = 2.0
_POLL_MIN, _POLL_MAX = 0.02, 0.5


# One immediate reconnection attempt, then the error: the job row is committed and the
# periodic sweep re-sends the message, so a broker that is down holds up no caller.
SEND_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0, "interval_max": 0}


def send_run_task(
    tenant: str, queue_id: int, countdown: float | None = None, expires: float | None = None
) -> None:
    """Send the Celery message asking a worker to run the open jobs of queue ``queue_id``
    (Celery's ``countdown`` and ``expires``); an unreachable broker raises at once."""
    from celery import current_app

    from tulip_memory.conf import settings

    # A signature by name: the task's own options (serializer, routing) still apply,
    # without importing tulip_memory.tasks (which imports the worker and the manager).
    current_app.signature(RUN_EXTRACTION_QUEUE, (tenant, queue_id)).apply_async(
        queue=settings.CELERY_QUEUE,
        countdown=countdown,
        expires=expires,
        retry_policy=SEND_RETRY_POLICY,
    )


def resend_stalled_queues(using: str = "default") -> int:
    """The periodic sweep: send one run message to every extraction queue of every tenant left
    with runnable jobs and none on its way (stalled); how many."""
    from tulip_memory.conf import settings
    from tulip_memory.models import ExtractionQueue, Tenant
    from tulip_memory.tenancy.context import tenant_atomic

    waited = float(settings.EXTRACTION_RESEND_AFTER)
    tenants = list(Tenant.objects.using(using).order_by("name").values_list("name", flat=True))
    sent = 0
    for tenant in tenants:
        with tenant_atomic(tenant, using=using):
            queue_ids = list(
                ExtractionQueue.objects.using(using)
                .filter(tenant=tenant)
                .stalled(waited)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
        for queue_id in queue_ids:
            send_run_task(tenant, queue_id, expires=waited)
            sent += 1
    return sent


def app_without_a_broker() -> tuple[Any, bool] | None:
    """Celery's current app when it has no broker, with whether it is Celery's built-in
    fallback (no project app loaded); ``None`` when it has a broker."""
    from celery import current_app

    app = current_app._get_current_object()
    if app.conf.broker_url or app.conf.broker_write_url:
        return None
    return app, app.main in (None, "default")


def _warn_without_a_project_app() -> None:
    missing = app_without_a_broker()
    if missing is not None and missing[1]:
        logger.error(
            "Sending an extraction job through Celery's default app: the project's Celery "
            "app is not loaded (import it in your project's __init__.py; docs/manager.md, "
            "'Celery in your project'), so the message goes to Celery's default broker "
            "and no worker of the project may ever run it."
        )


class CeleryExtractions:
    """The Celery jobs one manager enqueued, and how to wait for them."""

    def __init__(self, using: str = "default", refresh_every: int = 1000) -> None:
        self.using = using
        # After this many submissions, forget the jobs seen finished, so that a server
        # that never drains does not keep one entry per job forever.
        self.refresh_every = refresh_every
        self._submitted = 0
        # job id -> (tenant, queue id), once the job's transaction committed.
        self._pending: dict[int, tuple[str, int]] = {}

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def submit(self, namespace: Namespace, messages: list[Message]) -> int:
        job_id = await sync_to_async(self.enqueue)(namespace, messages)
        self._submitted += 1
        if self._submitted % self.refresh_every == 0:
            await sync_to_async(self._poll)(False)
        return job_id

    def enqueue(self, namespace: Namespace, messages: list[Message]) -> int:
        """Record a job for ``namespace`` and send its task when the transaction commits
        (synchronous: inside a caller's ``transaction.atomic`` the job is part of it)."""
        from django.db import transaction

        from tulip_memory.models import ExtractionJob
        from tulip_memory.tenancy.context import refuse_another_tenant, tenant_atomic

        tenant = namespace[0]
        refuse_another_tenant(tenant)  # as PgMemory inline: the worker would write there
        payload = {"messages": [message.to_dict() for message in messages]}
        with tenant_atomic(tenant, using=self.using):
            job_id, queue_id = ExtractionJob.objects.using(self.using).enqueue(namespace, payload)

            def committed() -> None:
                self._pending[job_id] = (tenant, queue_id)
                _warn_without_a_project_app()
                try:
                    send_run_task(tenant, queue_id)
                except Exception as exc:
                    # The job row is committed: it is not lost. The sweep (and drain())
                    # re-send the message of a queue nobody works on.
                    logger.warning(
                        "Extraction job %s of %r is stored but its Celery message could not "
                        "be sent (%s: %s); the sweep re-sends it once the broker answers.",
                        job_id,
                        namespace,
                        type(exc).__name__,
                        exc,
                    )

            transaction.on_commit(committed, using=self.using)
        return job_id

    def _poll(self, kick: bool) -> None:
        from tulip_memory.models import ExtractionJob, ExtractionQueue
        from tulip_memory.models.extraction import OPEN_STATES
        from tulip_memory.tenancy.context import tenant_atomic

        by_tenant: dict[str, list[int]] = defaultdict(list)
        for job_id, (tenant, _queue_id) in list(self._pending.items()):
            by_tenant[tenant].append(job_id)
        for tenant, job_ids in by_tenant.items():
            with tenant_atomic(tenant, using=self.using):
                still_open = set(
                    ExtractionJob.objects.using(self.using)
                    .filter(tenant=tenant, pk__in=job_ids, state__in=OPEN_STATES)
                    .values_list("pk", flat=True)
                )
                idle_queues: list[int] = []
                if kick and still_open:
                    queue_ids = {self._pending[job_id][1] for job_id in still_open}
                    idle_queues = list(
                        ExtractionQueue.objects.using(self.using)
                        .filter(tenant=tenant, pk__in=queue_ids)
                        .idle()
                        .values_list("pk", flat=True)
                    )
            for job_id in job_ids:
                if job_id not in still_open:
                    self._pending.pop(job_id, None)
            for queue_id in idle_queues:
                send_run_task(tenant, queue_id)

    def _poll_through_outage(self, kick: bool) -> None:
        """:meth:`_poll`, waiting out a database restart or failover instead of failing."""
        from django.db import InterfaceError, OperationalError, connections

        try:
            self._poll(kick)
        except (OperationalError, InterfaceError):
            connection = connections[self.using]
            if connection.in_atomic_block:
                raise  # the caller's transaction is broken: theirs to handle
            # The connection died with the server: drop it, the next poll opens a new one.
            logger.warning("drain: database unreachable, waiting", exc_info=True)
            connection.close_if_unusable_or_obsolete()

    async def drain(self) -> None:
        """Wait until every job this object enqueued is done or failed."""
        delay = _POLL_MIN
        last_kick = time.monotonic()
        while self._pending:
            kick = time.monotonic() - last_kick >= _KICK_INTERVAL
            if kick:
                last_kick = time.monotonic()
            await sync_to_async(self._poll_through_outage)(kick)
            if not self._pending:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, _POLL_MAX)
