"""The periodic sweep of the Celery extraction queues: re-send a message for every
namespace left with runnable jobs and none on its way (docs/design/extraction.md).
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
                .filter(tenant=tenant)
                .stalled(waited)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
        for queue_id in queue_ids:
            send_run_task(tenant, queue_id, expires=waited)
            sent += 1
    return sent
