"""``manage.py tulip_memory_retry_jobs``: per tenant, failed extraction jobs back to
``pending``, stuck ones requeued.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from tulip_memory.core.namespaces import decode_namespace
from tulip_memory.management.tenant_command import TenantCommand
from tulip_memory.retention.policy import retention_period


class Command(TenantCommand):
    help = (
        "Retry failed extraction jobs (back to pending, attempts reset) and requeue stuck "
        "queues (nobody works on a runnable job), tenant by tenant; one run message per "
        "queue touched."
    )
    vendors = ("postgresql",)
    arguments = {
        "--namespace": {
            "action": "append",
            "default": [],
            "metavar": "PATH",
            "help": "Only this namespace ('/'-joined, starting with its tenant; repeatable).",
        },
        "--only": {
            "choices": ("failed", "stuck"),
            "help": "Only retry failed jobs, or only requeue stuck queues (default: both).",
        },
        "--stuck-after": {
            "type": float,
            "metavar": "SECONDS",
            "help": "A runnable job nobody works on for this long is stuck (default: "
            "TULIP_MEMORY['EXTRACTION_RESEND_AFTER']).",
        },
    }

    def handle(self, *args: Any, **options: Any) -> None:
        from tulip_memory.conf import settings

        tenants = self.tenants(options)
        alias = options["database"]
        self.connection(alias)
        stuck_after = options["stuck_after"]
        named = "--stuck-after"
        if stuck_after is None:
            stuck_after = settings.EXTRACTION_RESEND_AFTER
            named = "TULIP_MEMORY['EXTRACTION_RESEND_AFTER']"
        try:
            stuck_after = retention_period(stuck_after, unit="seconds", strict=True).total_seconds()
        except ValueError as exc:
            raise CommandError(f"{named} {exc}") from None
        self.require_known(tenants, alias)
        namespaces: dict[str, list[str]] = {}
        for path in options["namespace"]:
            tenant = decode_namespace(path)[0]
            if tenant not in tenants:
                raise CommandError(
                    f"--namespace {path!r} belongs to tenant {tenant!r}, which is not among "
                    f"the tenants named ({', '.join(map(repr, tenants))})."
                )
            namespaces.setdefault(tenant, []).append(path)
        dry_run = options["dry_run"]
        verb = "would be" if dry_run else ""
        totals = [0, 0, 0]
        for tenant in tenants:
            if namespaces and tenant not in namespaces:
                continue
            failed, stuck, queues = self._tenant(
                tenant,
                alias,
                namespaces.get(tenant),
                only=options["only"],
                stuck_after=stuck_after,
                dry_run=dry_run,
            )
            self.stdout.write(
                f"Tenant {tenant!r}: {failed} failed job(s) {verb or 'are'} pending again, "
                f"{stuck} stuck queue(s) {verb or 'were'} requeued."
            )
            for tenant_queue in queues:
                self.stdout.write(f"  {tenant_queue}")
            totals[0] += failed
            totals[1] += stuck
            totals[2] += len(queues)
        summary = (
            f"{totals[0]} failed job(s) retried, {totals[1]} stuck queue(s) requeued, "
            f"{totals[2]} run message(s)"
        )
        if dry_run:
            self.stdout.write(f"Dry run: {summary} would be sent.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Done: {summary} sent."))

    def _tenant(
        self,
        tenant: str,
        alias: str,
        paths: list[str] | None,
        *,
        only: str | None,
        stuck_after: float,
        dry_run: bool,
    ) -> tuple[int, int, list[str]]:
        """(failed jobs retried, stuck queues, the queues' namespaces) of one tenant."""
        from tulip_memory.manager.extraction.queue import send_run_task
        from tulip_memory.models import ExtractionJob, ExtractionQueue
        from tulip_memory.models.extraction import JobState
        from tulip_memory.tenancy.context import tenant_atomic

        with tenant_atomic(tenant, using=alias):
            jobs = ExtractionJob.objects.using(alias)
            queues = ExtractionQueue.objects.using(alias)
            if paths is not None:
                jobs = jobs.filter(queue__namespace__in=paths)
                queues = queues.filter(namespace__in=paths)
            # Stuck before failed: a job retried here is not counted as stuck too.
            stuck: dict[int, str] = {}
            if only != "failed":
                stuck = dict(queues.stalled(stuck_after).values_list("pk", "namespace"))
            touched = dict(stuck)
            failed = 0
            if only != "stuck":
                failed_jobs = jobs.filter(state=JobState.FAILED)
                touched.update(failed_jobs.values_list("queue_id", "queue__namespace"))
                failed = failed_jobs.count() if dry_run else failed_jobs.retry_failed()
        if not dry_run:
            for queue_id in sorted(touched):
                try:
                    send_run_task(tenant, queue_id)
                except Exception as exc:  # the broker's error, whatever its client raises
                    raise CommandError(
                        f"Tenant {tenant!r}: the jobs are pending again, but the run message "
                        f"of queue {touched[queue_id]!r} could not be sent "
                        f"({type(exc).__name__}: {exc}). The periodic sweep sends it once "
                        "the broker is back, or run this command again."
                    ) from exc
        return failed, len(stuck), sorted(touched.values())
