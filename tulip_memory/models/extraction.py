"""The Celery extraction queue: :class:`ExtractionQueue` (a namespace's sequence and lease)
and :class:`ExtractionJob` (an ended session's messages, then what it applied), under
row-level security. Lease and retry times use the database's clock, never a worker's.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import connections, models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.db.models.lookups import Exact
from django.utils.translation import gettext_lazy as _

from tulip_memory.core.namespaces import decode_namespace, encode_namespace
from tulip_memory.tenancy.context import TENANT_MAX_LENGTH

__all__ = [
    "ENQUEUE_JOB_SQL",
    "OPEN_STATES",
    "ExtractionJob",
    "ExtractionJobQuerySet",
    "ExtractionQueue",
    "ExtractionQueueQuerySet",
    "JobState",
    "db_now_plus",
]


def db_now_plus(seconds: float) -> models.Expression:
    return models.ExpressionWrapper(
        Now() + models.Value(timedelta(seconds=seconds)), output_field=models.DateTimeField()
    )


# The key of a done job's payload listing what it did to memories: [event, type, key] lists.
APPLIED_KEY = "applied"


class ExtractionQueueQuerySet(models.QuerySet):
    def for_namespace(self, namespace: tuple[str, ...]) -> ExtractionQueueQuerySet:
        return self.filter(tenant=namespace[0], namespace=encode_namespace(namespace))

    def lease_free(self) -> ExtractionQueueQuerySet:
        """Queues whose lease is not held, or expired by the database's clock."""
        return self.filter(Q(lease_owner="") | Q(lease_expires_at__lt=Now()))

    def idle(self) -> ExtractionQueueQuerySet:
        """Queues nobody holds a live lease on, with a job that may run now."""
        runnable = ExtractionJob.objects.runnable().filter(
            tenant=models.OuterRef("tenant"), queue=models.OuterRef("pk")
        )
        return self.lease_free().filter(models.Exists(runnable))

    def stalled(self, waited: float) -> ExtractionQueueQuerySet:
        """Queues nobody holds a live lease on, with a job runnable for at least ``waited``
        seconds: its message was lost or its worker died mid-job."""
        since = db_now_plus(-waited)
        overdue = (
            ExtractionJob.objects.open()
            .filter(tenant=models.OuterRef("tenant"), queue=models.OuterRef("pk"))
            .filter(Q(run_after__isnull=True, created_at__lte=since) | Q(run_after__lte=since))
        )
        return self.lease_free().filter(models.Exists(overdue))

    def claim(self, queue_id: int, owner: str, lease_seconds: float) -> bool:
        """Take the lease of a queue that has none, or an expired one."""
        return bool(
            self.lease_free()
            .filter(pk=queue_id)
            .update(lease_owner=owner, lease_expires_at=db_now_plus(lease_seconds))
        )

    def renew(self, queue_id: int, owner: str, lease_seconds: float) -> bool:
        """Extend ``owner``'s lease; ``False`` if ``owner`` lost it."""
        return bool(
            self.filter(pk=queue_id, lease_owner=owner).update(
                lease_expires_at=db_now_plus(lease_seconds)
            )
        )

    def release(self, queue_id: int, owner: str) -> None:
        self.filter(pk=queue_id, lease_owner=owner).update(lease_owner="", lease_expires_at=None)

    def book_recheck(self, queue_id: int, *, early: float = 0.0) -> float | None:
        """Seconds until the current lease expires, if no recheck is booked for it yet or the
        one booked is due (within ``early`` seconds: a follow-up may run early on a worker
        whose clock is ahead). At most one follow-up per lease period."""
        booked = self.filter(pk=queue_id, lease_expires_at__isnull=False).filter(
            Q(recheck_at__isnull=True)
            | Q(recheck_at__lt=F("lease_expires_at"))
            | Q(recheck_at__lte=db_now_plus(early))
        )
        if not booked.update(recheck_at=F("lease_expires_at")):
            return None
        expires, now = (
            self.filter(pk=queue_id)
            .annotate(db_now=Now())
            .values_list("lease_expires_at", "db_now")
            .get()
        )
        return max(0.0, (expires - now).total_seconds())


class ExtractionQueue(models.Model):
    tenant = models.CharField(max_length=TENANT_MAX_LENGTH, help_text="namespace[0]")
    namespace = models.TextField(help_text="The memory namespace as a '/'-joined path")
    last_sequence = models.PositiveBigIntegerField(default=0)
    lease_owner = models.CharField(max_length=255, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    recheck_at = models.DateTimeField(null=True, blank=True)

    objects = ExtractionQueueQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_extraction_queue"
        verbose_name = _("extraction queue")
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "namespace"], name="tulip_extraction_queue_uniq"
            ),
        ]

    def __str__(self) -> str:
        return self.namespace

    @property
    def namespace_tuple(self) -> tuple[str, ...]:
        return decode_namespace(self.namespace)


class JobState(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


OPEN_STATES = (JobState.PENDING, JobState.RUNNING)


# ExtractionJobQuerySet.enqueue on PostgreSQL, one round trip. The queue row's upsert
# locks it until commit, so sequence numbers follow commit order; the tenant's row is
# inserted DO NOTHING, which takes no lock on an existing row.
ENQUEUE_JOB_SQL = (
    "WITH q AS (INSERT INTO tulip_memory_extraction_queue AS q "
    "(tenant, namespace, last_sequence, lease_owner) VALUES (%s, %s, 1, '') "
    "ON CONFLICT (tenant, namespace) DO UPDATE "
    "SET last_sequence = q.last_sequence + 1 RETURNING q.id, q.last_sequence) "
    "INSERT INTO tulip_memory_extraction_job (queue_id, tenant, sequence, payload, state, "
    "attempts, error, worker, created_at) "
    "SELECT q.id, %s, q.last_sequence, %s::jsonb, %s, 0, '', '', now() "
    "FROM q RETURNING id, queue_id"
)


class ExtractionJobQuerySet(models.QuerySet):
    def enqueue(self, namespace: tuple[str, ...], payload: dict[str, Any]) -> tuple[int, int]:
        """Insert the next job of ``namespace`` (creating its queue): ``(job id, queue id)``."""
        connection = connections[self.db]
        if connection.vendor != "postgresql":
            from tulip_memory.exceptions import ConfigurationError

            raise ConfigurationError(
                f"extract_mode='celery' keeps its jobs on PostgreSQL (row-level security, "
                f"per-namespace sequence numbers); database alias {self.db!r} is "
                f"{connection.vendor}"
            )
        tenant, path = namespace[0], encode_namespace(namespace)
        with connection.cursor() as cursor:
            params = [tenant, path, tenant, json.dumps(payload), JobState.PENDING.value]
            cursor.execute(ENQUEUE_JOB_SQL, params)
            job_id, queue_id = cursor.fetchone()
            return job_id, queue_id

    def open(self) -> ExtractionJobQuerySet:
        return self.filter(state__in=OPEN_STATES)

    def next_open(self, queue_id: int) -> tuple[ExtractionJob, datetime] | None:
        """The queue's lowest-numbered job not yet done or failed (locked), and the
        database's ``now()``."""
        job = (
            self.open()
            .filter(queue_id=queue_id)
            .annotate(db_now=Now())
            .select_for_update(of=("self",))
            .order_by("sequence")
            .first()
        )
        return None if job is None else (job, job.db_now)

    def finished_before(self, seconds: float) -> ExtractionJobQuerySet:
        """Done or failed jobs that finished at least ``seconds`` ago."""
        return self.filter(
            state__in=(JobState.DONE, JobState.FAILED), finished_at__lte=db_now_plus(-seconds)
        )

    def with_payload(self) -> ExtractionJobQuerySet:
        """Jobs whose payload still holds their conversation (not purged to ``{}``)."""
        return self.filter(payload__has_key="messages")

    def runnable(self) -> ExtractionJobQuerySet:
        """Open jobs that may run now (no retry delay pending)."""
        return self.open().filter(Q(run_after__isnull=True) | Q(run_after__lte=Now()))

    def retry_failed(self) -> int:
        """Put the failed jobs back to pending, attempts reset; how many. The caller sends
        their queues' run messages once this commits."""
        return self.filter(state=JobState.FAILED).update(
            state=JobState.PENDING, attempts=0, run_after=None, finished_at=None
        )


class _TenantForeignKey(models.ForeignKey):
    """A foreign key whose joins also match ``tenant`` on both sides: on Citus, a join on
    the distribution column, which co-located shards run. Only joins change, so its
    migrations state it as a plain ForeignKey."""

    def get_extra_restriction(self, alias: str | None, related_alias: str | None) -> Any:
        if alias is None or related_alias is None:
            return None
        remote, local = (
            cast(models.Field, model._meta.get_field("tenant"))
            for model in (self.related_model, self.model)
        )
        return Exact(remote.get_col(alias), local.get_col(related_alias))

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.ForeignKey", args, kwargs


class ExtractionJob(models.Model):
    """One extraction to run: the messages of an ended session, for one namespace."""

    queue = _TenantForeignKey(ExtractionQueue, on_delete=models.CASCADE, related_name="jobs")
    tenant = models.CharField(max_length=TENANT_MAX_LENGTH)
    sequence = models.PositiveBigIntegerField()
    payload = models.JSONField()
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(
        _("last error"),
        blank=True,
        default="",
        help_text="Of the last failed attempt; kept when a retry succeeds",
    )
    run_after = models.DateTimeField(null=True, blank=True, help_text="Retry not before")
    worker = models.CharField(max_length=255, blank=True, default="", help_text="Last runner")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What a chat model cost this job, summed over its attempts (0 without a model).
    # Database defaults: the enqueue statement (ENQUEUE_JOB_SQL) does not name them.
    llm_model = models.CharField(
        _("chat model"),
        max_length=200,
        blank=True,
        db_default="",
        help_text="Chat model of the last attempt",
    )
    llm_calls = models.PositiveIntegerField(_("chat model calls"), db_default=0)
    prompt_tokens = models.PositiveBigIntegerField(db_default=0)
    completion_tokens = models.PositiveBigIntegerField(db_default=0)
    llm_failed_requests = models.PositiveIntegerField(
        _("failed chat model requests"),
        db_default=0,
        help_text="Requests to the chat model that got no answer (retried or not)",
    )

    objects = ExtractionJobQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_extraction_job"
        verbose_name = _("extraction job")
        # The admin's retry action, and seeing a job's payload (the conversation text).
        permissions = [
            ("retry_extractionjob", _("Can retry a failed extraction job")),
            ("view_extractionjob_payload", _("Can see an extraction job's conversation")),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "sequence"], name="tulip_extraction_job_seq_uniq"
            ),
        ]
        indexes = [
            models.Index(
                fields=["tenant", "queue", "sequence"],
                condition=Q(state__in=["pending", "running"]),
                name="tulip_extraction_job_open_idx",
            ),
        ]

    def __str__(self) -> str:
        # The namespace people know; outside the tenant's transaction, the queue's id.
        try:
            namespace = self.queue.namespace
        except ExtractionQueue.DoesNotExist:
            namespace = f"queue {self.queue_id}"
        return f"{namespace} #{self.sequence} ({self.state})"

    def applied_operations(self) -> list[tuple[str, str, str]] | None:
        """What the job did to memories, ``(event, type, key)`` each; ``None`` when its
        payload does not say (not done yet, purged, erased)."""
        payload = self.payload if isinstance(self.payload, dict) else {}
        applied = payload.get(APPLIED_KEY)
        if not isinstance(applied, list):
            return None
        return [
            (str(entry[0]), str(entry[1]), str(entry[2]))
            for entry in applied
            if isinstance(entry, list) and len(entry) == 3
        ]
