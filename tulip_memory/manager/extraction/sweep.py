"""The periodic sweep of the Celery extraction queues: no namespace waits for a human.

A namespace can be left with runnable jobs and no message on its way to a worker:

* the broker was unreachable when ``on_session_end`` committed the job (the caller logs
  the failed send and returns at once; the job row is committed);
* a whole worker (its main process with its children: a lost host) was killed while it
  held the namespace's lease: its message was taken and not acknowledged, and Redis
  hands such a message out again only after its ``visibility_timeout`` (an hour by
  default); no follow-up was booked, since no other message found the lease taken.

:func:`resend_stalled_queues` — what the Celery task ``tulip_memory.sweep_extraction_queues``
runs on a beat schedule (:mod:`.schedule`) — reads the tenant registry
(:class:`~tulip_memory.models.Tenant`: names only, outside row-level security, filled
by a database trigger when a tenant's first row is written) and, in one transaction
pinned to each tenant, the queues that are *stalled*: no live
lease (free, or expired by the database's clock: its holder died) and a job runnable for
at least ``EXTRACTION_RESEND_AFTER`` seconds. It sends each such queue one run message;
the task claims the lease (an expired one included) and runs the open jobs in order, a
job left ``running`` by the dead worker first (that attempt counts).

Each message it sends expires after ``EXTRACTION_RESEND_AFTER`` seconds: while no worker
runs, the sweeps do not pile messages up in the broker (a worker drops an expired
message; the next sweep sends another). Sweeps running at once, or a sweep racing the
namespace's own message, only send duplicates, which change nothing (the lease decides).
"""

from __future__ import annotations

from tulip_memory.manager.extraction.queue import send_run_task

__all__ = ["resend_stalled_queues"]


def resend_stalled_queues(using: str = "default") -> int:
    """Send one run message to every stalled extraction queue, of every tenant; how many."""
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
                .stalled(waited)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
        for queue_id in queue_ids:
            send_run_task(tenant, queue_id, expires=waited)
            sent += 1
    return sent
