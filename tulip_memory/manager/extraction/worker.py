"""``extract_mode="celery"``, the worker's side: run a namespace's jobs in order under a
lease, with retries and usage accounting (docs/design/extraction.md).

A run is bound to the tenant of the queue's row (a job naming another tenant fails, nothing
run); an attempt whose lease was revoked writes nothing back; errors carry the exception's
type and a reason of ours, its message only at DEBUG.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Now, NullIf

from tulip_memory.events import (
    EV_MEMORY_MANAGER_EXTRACT_FAILED,
    EV_MEMORY_MANAGER_EXTRACTED,
    emit_sync,
)
from tulip_memory.exceptions import ConfigurationError, LeaseLostError, LLMError, TenantError
from tulip_memory.llm.usage import Usage
from tulip_memory.manager.base import failure_fields
from tulip_memory.manager.factory import build_memory_manager_from_settings
from tulip_memory.manager.llm import LLMMemoryManager
from tulip_memory.manager.types import ExtractionOutcome
from tulip_memory.messages import Message

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from tulip_memory.models import ExtractionJob

__all__ = ["RunOutcome", "run_queue"]

logger = logging.getLogger("tulip_memory.manager.extraction.worker")

_MAX_RETRY_DELAY = 600.0

# How early a booked follow-up may run and still count as the booking's own message (clock
# skew between workers); at most a tenth of the lease.
RECHECK_SKEW_SECONDS = 1.0

# What failed, in a failed attempt's error (failure_fields), when it is not the extraction.
_UNREADABLE_PAYLOAD = "the job's payload does not decode to messages"
_DATABASE_FAILED = "a database error cut the attempt"


@dataclass
class RunOutcome:
    """What one :func:`run_queue` call did, and when the queue wants to be run again."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    retry_in: float | None = None


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _attempt_row(
    tenant: str, job_id: int, queue_id: int, owner: str
) -> QuerySet[ExtractionJob] | None:
    """Inside ``tenant_atomic``: job ``job_id``'s row, locked, if it is still ``owner``'s
    running attempt and ``owner`` still holds queue ``queue_id``'s lease (an erasure
    revokes the lease alone), else ``None``. The job is locked before the lease is read,
    in an erasure's order. Every statement names the tenant: one shard's on Citus."""
    from tulip_memory.models import ExtractionJob, ExtractionQueue, JobState

    rows = ExtractionJob.objects.filter(
        tenant=tenant, pk=job_id, state=JobState.RUNNING, worker=owner
    )
    if not rows.select_for_update().exists():
        return None
    if not ExtractionQueue.objects.filter(tenant=tenant, pk=queue_id, lease_owner=owner).exists():
        return None
    return rows


class _Heartbeat:
    """Renews a lease every third of its length while its holder runs jobs (a thread with
    its own connection, which dies with the worker); stops renewing for an attempt running
    past ``job_timeout``, whose save :meth:`fence` then refuses."""

    def __init__(
        self,
        tenant: str,
        queue_id: int,
        owner: str,
        lease: float,
        job_timeout: float | None = None,
    ) -> None:
        self.tenant, self.queue_id, self.owner, self.lease = tenant, queue_id, owner, lease
        self.job_timeout = job_timeout
        # (job id, attempt, deadline on the monotonic clock) of the running attempt.
        self._job: tuple[int, int, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tulip-memory-lease", daemon=True)

    def job_started(self, job_id: int, attempt: int) -> None:
        deadline = time.monotonic() + (
            self.job_timeout if self.job_timeout is not None else float("inf")
        )
        self._job = (job_id, attempt, deadline)

    def job_ended(self) -> None:
        self._job = None

    def overdue(self) -> tuple[int, int, float] | None:
        """The running attempt (job id, attempt, deadline) if past the job timeout."""
        job = self._job  # one read: the worker's thread changes it
        return job if job is not None and time.monotonic() >= job[2] else None

    def timeout_error(self, attempt: int) -> str:
        return (
            f"JobTimeout: attempt {attempt} ran over EXTRACTION_JOB_TIMEOUT_SECONDS "
            f"({self.job_timeout:g} s); its lease was left to expire"
        )

    def _renew(self) -> bool:
        from tulip_memory.models import ExtractionQueue
        from tulip_memory.tenancy.context import tenant_atomic

        with tenant_atomic(self.tenant):
            queues = ExtractionQueue.objects.filter(tenant=self.tenant)
            return queues.renew(self.queue_id, self.owner, self.lease)

    def fence(self) -> None:
        """Right before a job's save: raise :class:`LeaseLostError` (nothing is saved) if the
        attempt has run past the job timeout or ``owner`` lost the lease; else renew it."""
        overdue = self.overdue()
        if overdue is not None:
            raise LeaseLostError(self.timeout_error(overdue[1]))
        if not self._renew():
            raise LeaseLostError(f"lost the lease of extraction queue {self.queue_id}")

    def _give_up(self, job_id: int, attempt: int) -> None:
        from tulip_memory.tenancy.context import tenant_atomic

        error = self.timeout_error(attempt)
        logger.error(
            "extraction job %s: %s; the lease of extraction queue %s is no longer renewed, "
            "another worker takes the namespace over once it expires",
            job_id,
            error,
            self.queue_id,
        )
        with tenant_atomic(self.tenant):
            row = _attempt_row(self.tenant, job_id, self.queue_id, self.owner)
            if row is not None:
                row.update(error=error)

    def _run(self) -> None:
        given_up: tuple[int, int, float] | None = None
        try:
            while not self._stop.wait(self.lease / 3):
                try:
                    overdue = self.overdue()
                    if overdue is not None:
                        if given_up != overdue:
                            given_up = overdue
                            self._give_up(overdue[0], overdue[1])
                        continue  # not renewed: the lease expires
                    if not self._renew():
                        return
                except Exception:
                    # A transient error must not end the heartbeat: the lease would expire
                    # under a live worker and a second one would run this namespace.
                    logger.exception("lease heartbeat of extraction queue %s failed", self.queue_id)
                    connections.close_all()
        finally:
            connections.close_all()

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def _usage_columns(
    model: str | None, usage: Usage | None, *, latest: bool = True
) -> dict[str, object]:
    """The job-row updates adding ``usage`` as increments (two workers' attempts add up in
    any commit order); only the ``latest`` attempt replaces the row's model."""
    if usage is None:
        return {}
    columns: dict[str, object] = {
        "llm_calls": F("llm_calls") + usage.calls,
        "prompt_tokens": F("prompt_tokens") + usage.prompt_tokens,
        "completion_tokens": F("completion_tokens") + usage.completion_tokens,
        "llm_failed_requests": F("llm_failed_requests") + usage.failed_requests,
    }
    if model:
        columns["llm_model"] = (
            model if latest else Coalesce(NullIf(F("llm_model"), Value("")), Value(model))
        )
    return columns


def _spent(exc: BaseException) -> Usage | None:
    """The model usage an attempt's error carries, or ``None``."""
    carriers = (LLMError, LeaseLostError, OperationalError, InterfaceError)
    usage = getattr(exc, "usage", None) if isinstance(exc, carriers) else None
    return usage if isinstance(usage, Usage) else None


def _described(usage: Usage | None) -> object:
    return usage.as_fields() if usage is not None else "none reported"


def _retry_delay(attempts: int) -> float:
    from tulip_memory.conf import settings

    return min(float(settings.EXTRACTION_RETRY_DELAY) * 2 ** max(attempts - 1, 0), _MAX_RETRY_DELAY)


@dataclass
class _QueueRun:
    """One claim of a queue: its open jobs run in order while ``heartbeat`` holds the lease,
    how each attempt ended counted in ``outcome``."""

    namespace: tuple[str, ...]
    manager: LLMMemoryManager
    heartbeat: _Heartbeat
    outcome: RunOutcome
    # The task's last retry: a database error counts as the attempt's failure.
    charge_database_errors: bool

    @property
    def fields(self) -> dict[str, Any]:
        """The fields of this run's events besides the job's."""
        return {"namespace": list(self.namespace), "mode": "celery"}

    @property
    def model(self) -> str | None:
        extractor = self.manager.extractor
        return extractor.config.model if extractor is not None else None

    def run(self) -> float | None:
        """Run open jobs while holding the lease; seconds until a retry is due, if one is."""
        from tulip_memory.conf import settings
        from tulip_memory.models import ExtractionJob, ExtractionQueue, JobState
        from tulip_memory.tenancy.context import tenant_atomic

        heartbeat = self.heartbeat
        tenant, queue_id, owner = heartbeat.tenant, heartbeat.queue_id, heartbeat.owner
        max_attempts = int(settings.EXTRACTION_MAX_ATTEMPTS)
        while True:
            with tenant_atomic(tenant):
                # The job's row is locked before the queue's, in an erasure's order: the two
                # cannot deadlock, and an erasure's revoked lease fails the renewal.
                found = ExtractionJob.objects.filter(tenant=tenant).next_open(queue_id)
                queues = ExtractionQueue.objects.filter(tenant=tenant)
                if not queues.renew(queue_id, owner, heartbeat.lease):
                    logger.warning("lost the lease of extraction queue %s; stopping", queue_id)
                    return None
                if found is None:
                    return None
                job, db_now = found
                if job.run_after is not None and job.run_after > db_now:
                    return (job.run_after - db_now).total_seconds()
                if self.namespace[0] != job.tenant:
                    # Never run: a store other than PgMemory could write into that tenant.
                    error = (
                        f"{TenantError.__name__}: the queue's namespace is of tenant "
                        f"{self.namespace[0]!r}, not of the job's tenant {job.tenant!r}; "
                        "nothing was run"
                    )
                    self._fail_at_once(job, error, TenantError.__name__)
                    continue
                if job.attempts >= max_attempts:
                    # Its last attempt never reported: the worker died or hung.
                    error = f"worker lost during attempt {job.attempts}; {job.error}".rstrip("; ")
                    self._fail_at_once(job, error, "WorkerLost")
                    continue
                job.attempts += 1
                job.worker = owner
                ExtractionJob.objects.filter(tenant=tenant, pk=job.pk).update(
                    state=JobState.RUNNING,
                    attempts=job.attempts,
                    worker=owner,
                    started_at=Now(),
                    run_after=None,
                )
            heartbeat.job_started(job.pk, job.attempts)
            try:
                if not self._run_job(job):
                    # A hung attempt forfeited the lease: hand the namespace over at once.
                    return 0.0 if heartbeat.overdue() is not None else None
            except (OperationalError, InterfaceError) as exc:
                self._database_failed(job, exc)
                raise
            finally:
                heartbeat.job_ended()

    async def _extract(self, messages: list[Message], run_id: str) -> ExtractionOutcome:
        """One job's extraction in the queue's namespace, fenced right before the save."""
        with self.manager.scoped(self.namespace):
            return await self.manager.run_extraction(
                messages, run_id=run_id, before_save=sync_to_async(self.heartbeat.fence)
            )

    def _run_job(self, job: ExtractionJob) -> bool:
        """Run the attempt at ``job`` and record how it ended; ``False`` if the worker lost
        (or forfeited) its lease and must stop. A database error propagates unrecorded."""
        from tulip_memory.conf import settings
        from tulip_memory.models import ExtractionJob, JobState
        from tulip_memory.models.extraction import APPLIED_KEY

        try:
            messages = [Message.from_dict(data) for data in job.payload.get("messages", [])]
        except Exception as exc:
            self._record_failure(job, exc, what=_UNREADABLE_PAYLOAD)
            return True
        try:
            result = async_to_sync(self._extract)(messages, f"job-{job.pk}")
        except LeaseLostError as lost:
            # Nothing was saved, but the model was asked (and paid) for what was planned.
            spent = _spent(lost)
            self._record_attempt(job, spent)
            logger.warning(
                "extraction job %s of extraction queue %s: %s; stopping, nothing saved (model "
                "usage of the attempt: %s)",
                job.pk,
                job.queue_id,
                lost,
                _described(spent),
            )
            return False
        except (OperationalError, InterfaceError):
            raise  # not the job's failure: see _database_failed
        except Exception as exc:
            self._record_failure(job, exc)
            return True
        self._record_attempt(
            job,
            result.usage,
            model=result.model,
            state=JobState.DONE,
            finished_at=Now(),
            # What the job did, for its admin page, beside the conversation (and gone with it
            # when the payload is purged or erased); JOB_PAYLOAD_PURGE_AFTER_HOURS = 0: the
            # conversation goes as the job ends. A payload an erasure emptied stays as it left it.
            payload=job.payload
            if job.payload.get("erased") is True
            else {
                **({} if settings.JOB_PAYLOAD_PURGE_AFTER_HOURS == 0 else job.payload),
                APPLIED_KEY: [list(operation) for operation in result.applied],
            },
        )
        self.outcome.done += 1
        emit_sync(
            EV_MEMORY_MANAGER_EXTRACTED,
            sender=ExtractionJob,
            **result.event_fields(),
            job=job.pk,
            **self.fields,
        )
        return True

    def _record_attempt(
        self, job: ExtractionJob, usage: Usage | None, model: str | None = None, **columns: object
    ) -> bool:
        """Record the end of this worker's attempt at ``job``: ``columns`` and its model usage
        (of ``model``, by default the manager's) if the job is still that attempt's (then
        ``True``), else the usage alone."""
        from tulip_memory.models import ExtractionJob
        from tulip_memory.tenancy.context import tenant_atomic

        if not columns and usage is None:
            return False
        model = model or self.model
        with tenant_atomic(job.tenant):
            mine = _attempt_row(job.tenant, job.pk, job.queue_id, self.heartbeat.owner)
            if mine is not None and mine.update(**columns, **_usage_columns(model, usage)):
                return True
            if usage is not None:
                ExtractionJob.objects.filter(tenant=job.tenant, pk=job.pk).update(
                    **_usage_columns(model, usage, latest=False)
                )
            return False

    def _record_failure(self, job: ExtractionJob, exc: Exception, what: str | None = None) -> None:
        """Put a failed attempt through the retry policy (pending again later, or failed);
        ``exc``'s message is logged at DEBUG only. After a lost lease only the usage is
        recorded and no ``extract_failed`` is sent."""
        from tulip_memory.conf import settings
        from tulip_memory.models import JobState
        from tulip_memory.models.extraction import db_now_plus

        final = job.attempts >= int(settings.EXTRACTION_MAX_ATTEMPTS)
        failure = failure_fields(exc, what)
        logger.error(
            "extraction job %s (attempt %s) failed: %s", job.pk, job.attempts, failure["error"]
        )
        logger.debug("extraction job %s (attempt %s) failed", job.pk, job.attempts, exc_info=exc)
        # A model's failure still cost tokens: they go onto the row too.
        spent = _spent(exc)
        if not self._record_attempt(
            job,
            spent,
            state=JobState.FAILED if final else JobState.PENDING,
            error=failure["error"],
            finished_at=Now() if final else None,
            run_after=None if final else db_now_plus(_retry_delay(job.attempts)),
        ):
            logger.warning(
                "extraction job %s: this worker lost the lease of extraction queue %s (another "
                "worker has taken it over, or an erasure revoked it), so attempt %s's failure "
                "is not recorded as the job's (model usage of the attempt, added to the row: %s)",
                job.pk,
                job.queue_id,
                job.attempts,
                _described(spent),
            )
            return
        self._failed(job, final, **failure)

    def _fail_at_once(self, job: ExtractionJob, error: str, error_type: str) -> None:
        """Mark ``job`` failed with ``error``, no attempt run, and send its ``extract_failed``."""
        from tulip_memory.models import ExtractionJob, JobState

        logger.error("extraction job %s failed: %s", job.pk, error)
        ExtractionJob.objects.filter(tenant=job.tenant, pk=job.pk).update(
            state=JobState.FAILED, error=error, finished_at=Now()
        )
        self._failed(job, True, error=error, error_type=error_type)

    def _failed(self, job: ExtractionJob, final: bool, **failure: Any) -> None:
        """Count a recorded failure and send its ``extract_failed``."""
        from tulip_memory.models import ExtractionJob

        if final:
            self.outcome.failed += 1
        else:
            self.outcome.retried += 1
        emit_sync(
            EV_MEMORY_MANAGER_EXTRACT_FAILED,
            sender=ExtractionJob,
            **failure,
            job=job.pk,
            final=final,
            **self.fields,
        )

    def _database_failed(self, job: ExtractionJob, exc: Exception) -> None:
        """A database error cut ``job``'s attempt: the job goes back to ``pending``, the
        attempt given back (on the task's last retry: counted as a failure instead), with
        the usage ``exc`` carries added. Nothing raised here masks ``exc``, which the
        caller re-raises."""
        from tulip_memory.models import JobState

        spent = _spent(exc)
        step: Callable[[], object]
        if self.charge_database_errors:
            step = functools.partial(self._record_failure, job, exc, _DATABASE_FAILED)
        else:
            logger.warning(
                "extraction job %s (attempt %s) was cut by a database error (%s: %s): it goes "
                "back to pending, the attempt not counted, and the task retries",
                job.pk,
                job.attempts,
                type(exc).__name__,
                exc,
            )
            step = functools.partial(
                self._record_attempt,
                job,
                spent,
                state=JobState.PENDING,
                attempts=job.attempts - 1,
                run_after=None,
            )
        try:
            _on_a_live_connection(step)
        except Exception:
            logger.exception(
                "extraction job %s: the database error could not be recorded; the attempt "
                "stays counted (model usage of the attempt, not added to the row: %s)",
                job.pk,
                _described(spent),
            )


def _on_a_live_connection(step: Callable[[], object]) -> None:
    """Run ``step`` (which opens its own transaction), once more on a new connection if the
    database dropped this one (after a restart)."""
    for attempt in (1, 2):
        try:
            step()
            return
        except (OperationalError, InterfaceError):
            connection = connections[DEFAULT_DB_ALIAS]
            if attempt == 2 or connection.in_atomic_block:
                raise
            connection.close_if_unusable_or_obsolete()


def _release(tenant: str, queue_id: int, owner: str) -> None:
    from tulip_memory.models import ExtractionQueue
    from tulip_memory.tenancy.context import tenant_atomic

    with tenant_atomic(tenant):
        ExtractionQueue.objects.filter(tenant=tenant).release(queue_id, owner)


def _build_manager() -> LLMMemoryManager:
    """The manager this worker runs jobs with; one that cannot be built from the settings
    is the worker's failure (:class:`ConfigurationError`, nothing claimed), not a job's."""
    try:
        return build_memory_manager_from_settings()
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        logger.error(
            "this worker cannot build its memory manager from TULIP_MEMORY (%s: %s); it "
            "runs no extraction job, they stay pending",
            type(exc).__name__,
            exc,
        )
        raise ConfigurationError(
            "the extraction worker cannot build its memory manager from TULIP_MEMORY "
            f"(STORE, STORE_OPTIONS, EXTRACTOR, MANAGER_OPTIONS): {type(exc).__name__}: {exc}"
        ) from exc


def run_queue(
    tenant: str,
    queue_id: int,
    *,
    owner: str | None = None,
    charge_database_errors: bool = False,
) -> RunOutcome:
    """Run the open jobs of extraction queue ``queue_id`` in order, ``tenant`` bound.
    ``charge_database_errors`` (the task's last retry): a database error counts as the
    attempt's failure instead of being given back."""
    from tulip_memory.conf import settings
    from tulip_memory.core.namespaces import decode_namespace
    from tulip_memory.models import ExtractionJob, ExtractionQueue
    from tulip_memory.tenancy.context import tenant_atomic, tenant_context

    manager = _build_manager()
    owner = owner or worker_identity()
    lease = float(settings.EXTRACTION_LEASE_SECONDS)
    job_timeout = float(settings.EXTRACTION_JOB_TIMEOUT_SECONDS)
    outcome = RunOutcome()
    with tenant_context(tenant):
        while True:
            with tenant_atomic(tenant):
                # Every statement names the tenant: on Citus, one shard's (a router query).
                queues = ExtractionQueue.objects.filter(tenant=tenant)
                if not queues.claim(queue_id, owner, lease):
                    outcome.retry_in = queues.book_recheck(
                        queue_id, early=min(RECHECK_SKEW_SECONDS, lease / 10)
                    )
                    return outcome
                path = queues.values_list("namespace", flat=True).get(pk=queue_id)
            try:
                with _Heartbeat(tenant, queue_id, owner, lease, job_timeout) as heartbeat:
                    namespace = decode_namespace(path)
                    run = _QueueRun(namespace, manager, heartbeat, outcome, charge_database_errors)
                    retry_in = run.run()
            finally:
                # On a new connection if the database dropped this one, so that the task's
                # retry need not wait for the lease to expire.
                _on_a_live_connection(lambda: _release(tenant, queue_id, owner))
            if retry_in is not None:
                outcome.retry_in = retry_in
                return outcome
            with tenant_atomic(tenant):
                jobs = ExtractionJob.objects.filter(tenant=tenant, queue_id=queue_id)
                if not jobs.runnable().exists():
                    return outcome
