"""Admin of the Celery extraction queues and jobs, one tenant at a time, read-only but for
**retry** (``retry_extractionjob``: failed jobs pending again, logged); a job's conversation
needs ``view_extractionjob_payload``.
"""

from __future__ import annotations

from datetime import timedelta
from functools import partial
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.db import router, transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.checkpoints import (
    NOT_READ,
    admin_url,
    change_link,
    read_state,
    render_conversation,
)
from tulip_memory.admin.tenancy import ListQuerysetMixin, ReadOnlyTenantAdmin, column
from tulip_memory.core.namespaces import encode_namespace
from tulip_memory.models import ExtractionJob, ExtractionQueue, MemoryItem
from tulip_memory.models.admin_log import log_actions
from tulip_memory.models.extraction import JobState

__all__ = ["ExtractionJobAdmin", "ExtractionQueueAdmin"]

# The admin log's message of a retried job (the job's error stays out of the log).
RETRIED_MESSAGE = "Retried a failed job"


class QueueNamespaceFilter(admin.SimpleListFilter):
    """Jobs of one namespace (one queue) of the tenant."""

    title = _("namespace")
    parameter_name = "queue"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        queues = ExtractionQueue.objects.order_by("namespace").values_list("pk", "namespace")
        return [(str(pk), namespace) for pk, namespace in queues[:200]]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        if not value.isdigit():
            return queryset.none()
        return queryset.filter(queue_id=int(value))


def _jobs_in(state: str) -> Coalesce:
    """The count of a queue's jobs in ``state``: a subquery on the queue's tenant and id,
    which Citus runs beside the queue's shard (a join grouped by the queue's ``id`` alone
    is refused there, its key being ``(tenant, id)``)."""
    jobs = ExtractionJob.objects.filter(
        tenant=OuterRef("tenant"), queue_id=OuterRef("pk"), state=state
    )
    count = jobs.order_by().values("queue_id").annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(count, output_field=IntegerField()), 0)


@admin.register(ExtractionQueue)
class ExtractionQueueAdmin(ReadOnlyTenantAdmin):
    list_display = (
        "namespace",
        "lease_owner",
        "heartbeat_age",
        "lease_expires_at",
        "pending_jobs",
        "running_jobs",
        "failed_jobs",
        "jobs_link",
    )
    search_fields = ("namespace",)
    readonly_fields = (
        "tenant",
        "namespace",
        "last_sequence",
        "lease_owner",
        "heartbeat_age",
        "lease_expires_at",
        "recheck_at",
        "pending_jobs",
        "running_jobs",
        "failed_jobs",
        "jobs_link",
    )

    def get_queryset(self, request: Any) -> Any:
        # Each count under its state's name (the columns below).
        counted = (JobState.PENDING, JobState.RUNNING, JobState.FAILED)
        return super().get_queryset(request).annotate(**{s.value: _jobs_in(s) for s in counted})

    pending_jobs = column("pending", _("pending"))
    running_jobs = column("running", _("running"))
    failed_jobs = column("failed", _("failed"))

    @admin.display(description=_("last heartbeat"))
    def heartbeat_age(self, queue: ExtractionQueue) -> str:
        """How long ago the lease holder last renewed its lease (no holder: "-")."""
        from tulip_memory.conf import settings

        if not queue.lease_owner or queue.lease_expires_at is None:
            return "-"
        beat = queue.lease_expires_at - timedelta(seconds=float(settings.EXTRACTION_LEASE_SECONDS))
        age = (timezone.now() - beat).total_seconds()
        if queue.lease_expires_at < timezone.now():
            return gettext("%(age).0f s ago (lease expired)") % {"age": age}
        return gettext("%(age).0f s ago") % {"age": max(age, 0.0)}

    @admin.display(description=_("jobs"))
    def jobs_link(self, queue: ExtractionQueue) -> str:
        url = admin_url(ExtractionJob, "changelist")
        return format_html('<a href="{}?queue={}">{}</a>', url, queue.pk, gettext("jobs"))


@admin.register(ExtractionJob)
class ExtractionJobAdmin(ListQuerysetMixin, ReadOnlyTenantAdmin):
    list_display = (
        "id",
        "queue_link",
        "state",
        "attempts",
        "worker",
        "usage",
        "created_at",
        "finished_at",
    )
    list_filter = ("state", "created_at", QueueNamespaceFilter)
    date_hierarchy = "created_at"
    search_fields = ("queue__namespace", "error")
    ordering = ("-id",)
    list_select_related = ("queue",)
    actions = ["retry_jobs"]
    readonly_fields = (
        "queue_link", "tenant", "sequence", "state", "attempts", "error", "run_after",
        "worker", "created_at", "started_at", "finished_at",
        "llm_model", "llm_calls", "prompt_tokens", "completion_tokens", "llm_failed_requests",
        "memory_operations", "conversation",
    )  # fmt: skip

    def get_list_queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        # The payload (the conversation) shows on the job's page only.
        return queryset.defer("payload")

    def get_fields(self, request: Any, obj: Any = None) -> Any:
        fields = list(self.readonly_fields)
        if not self.has_view_payload_permission(request):
            fields.remove("conversation")
        return fields

    def has_view_payload_permission(self, request: Any) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.view_extractionjob_payload")

    def has_retry_permission(self, request: Any) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.retry_extractionjob")

    @admin.display(description=_("chat model usage"))
    def usage(self, job: ExtractionJob) -> str:
        text = ngettext(
            "%(calls)d call, %(prompt)d + %(completion)d tokens",
            "%(calls)d calls, %(prompt)d + %(completion)d tokens",
            job.llm_calls,
        ) % {
            "calls": job.llm_calls,
            "prompt": job.prompt_tokens,
            "completion": job.completion_tokens,
        }
        if job.llm_failed_requests:
            failed = job.llm_failed_requests
            text += ngettext(
                "; %(failed)d failed request", "; %(failed)d failed requests", failed
            ) % {"failed": failed}
        return text

    @admin.display(description=_("queue #sequence"), ordering="queue__namespace")
    def queue_link(self, job: ExtractionJob) -> str:
        link = change_link(ExtractionQueue, job.queue_id, job.queue.namespace)
        return format_html("{} #{}", link, job.sequence)

    @admin.display(description=_("memory operations"))
    def memory_operations(self, job: ExtractionJob) -> str:
        """What the job did to memories, each memory still stored linked to its page."""
        applied = job.applied_operations()
        if applied is None:
            if job.state == JobState.DONE:
                return gettext("Not recorded: the job's payload was purged or erased.")
            return gettext("None yet: the job is not done.")
        if not applied:
            return gettext("None: the job changed no memory.")
        prefix = job.queue.namespace_tuple
        stored = MemoryItem.objects.for_keys([((*prefix, kind), key) for _, kind, key in applied])
        pks = {(ns, key): pk for pk, ns, key in stored.values_list("pk", "namespace", "key")}
        rows = []
        for event, kind, key in applied:
            pk = pks.get((encode_namespace((*prefix, kind)), key))
            label = f"{kind}/{key}"
            if pk is None:
                # Deleted by the job itself or since, or kept by a store other than PgMemory.
                shown: str = format_html("{} ({})", label, gettext("not in the memory table"))
            else:
                shown = change_link(MemoryItem, pk, label)
            rows.append((event, shown))
        return format_html(
            '<ul class="tulip-operations">{}</ul>',
            format_html_join("", "<li><code>{}</code> {}</li>", rows),
        )

    @admin.display(description=_("conversation (payload)"))
    def conversation(self, job: ExtractionJob) -> str:
        payload = job.payload if isinstance(job.payload, dict) else {}
        state = read_state({"messages": payload.get("messages") or []})
        # A job's conversation has no parent to compare with: no diff line.
        return render_conversation(state, NOT_READ, diff=False)

    @admin.action(description=_("Retry the selected failed jobs"), permissions=["retry"])
    def retry_jobs(self, request: Any, queryset: QuerySet) -> None:
        from tulip_memory.manager.extraction.queue import send_run_task

        failed = list(
            queryset.filter(state=JobState.FAILED).select_related("queue").defer("payload")
        )
        if not failed:
            self.message_user(request, gettext("No failed job was selected."), messages.WARNING)
            return
        ExtractionJob.objects.using(queryset.db).filter(
            pk__in=[j.pk for j in failed]
        ).retry_failed()
        log_actions(
            request.user.pk, ExtractionJob, [job.pk for job in failed], CHANGE, RETRIED_MESSAGE
        )
        queues = {(job.tenant, job.queue_id) for job in failed}
        using = router.db_for_write(ExtractionJob)
        for tenant, queue_id in sorted(queues):
            transaction.on_commit(
                partial(send_run_task, tenant, queue_id), using=using, robust=True
            )
        self.message_user(
            request,
            ngettext(
                "%(count)d failed job is pending again; its worker was asked to run it.",
                "%(count)d failed jobs are pending again; their workers were asked to run them.",
                len(failed),
            )
            % {"count": len(failed)},
            messages.SUCCESS,
        )
