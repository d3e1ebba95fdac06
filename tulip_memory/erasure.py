"""Erasure: forget everything the memory layer keeps about one subject, in one transaction
pinned to the tenant, with a receipt (docs/operations.md, 'Erasure').
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from tulip_memory.core.namespaces import (
    NAMESPACE_SEPARATOR,
    Namespace,
    encode_namespace,
    validate_namespace,
)
from tulip_memory.core.subjects import subject_namespaces, validate_subject
from tulip_memory.events import EV_STORE_SUBJECT_FORGOTTEN, elapsed_ms
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.manager.history import HISTORY_LABEL
from tulip_memory.models.admin_log import scrub_entries
from tulip_memory.tenancy.context import (
    emit_on_commit,
    refuse_another_tenant,
    tenant_atomic,
    validate_tenant,
)

if TYPE_CHECKING:
    from tulip_memory.models import ErasureReceipt
    from tulip_memory.tenancy.database import TenantDatabase

__all__ = [
    "ERASED_PAYLOAD",
    "ERASED_QUEUE_LABEL",
    "ErasureReport",
    "aforget_subject",
    "forget_subject",
]

# What an extraction job's payload becomes: no messages, and the mark of an erased one.
ERASED_PAYLOAD: dict[str, Any] = {"messages": [], "erased": True}
# The label after the tenant of an erased subject's extraction queues.
ERASED_QUEUE_LABEL = "_erased"
_ERROR_MESSAGE = ": "
_HISTORY_MARK = f"{NAMESPACE_SEPARATOR}{HISTORY_LABEL}{NAMESPACE_SEPARATOR}"


@dataclass(frozen=True)
class ErasureReport:
    """What :func:`forget_subject` removed (or, in a dry run, would remove)."""

    tenant: str
    subject_ref: str
    counts: dict[str, int]
    namespaces: tuple[Namespace, ...]
    dry_run: bool
    receipt: ErasureReceipt | None = field(default=None, compare=False)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _actor_label(actor: object) -> str:
    """A receipt's ``actor``: the string given, or a user's name and id."""
    if actor is None:
        return ""
    if isinstance(actor, str):
        return actor.strip()[:255]
    get_username = getattr(actor, "get_username", None)
    pk = getattr(actor, "pk", None)
    if callable(get_username) and pk is not None:
        return f"{get_username()} (user {pk})"[:255]
    raise ValueError(f"actor must be a str, a user or None, got {type(actor).__name__}")


def _prefixes(tenant: str, subject: str, extra: Sequence[Sequence[str]]) -> tuple[Namespace, ...]:
    if isinstance(extra, str) or not isinstance(extra, Sequence):
        raise ValueError(
            "namespace_prefixes must be a sequence of label tuples (after the tenant), "
            f"got {type(extra).__name__}"
        )
    prefixes = list(subject_namespaces(tenant, subject))
    for index, labels in enumerate(extra):
        if not isinstance(labels, tuple) or not labels:
            raise ValueError(
                f"namespace_prefixes[{index}] must be a non-empty tuple of labels after the "
                f"tenant, got {labels!r:.80}"
            )
        prefix = validate_namespace((tenant, *labels), name=f"namespace_prefixes[{index}]")
        if prefix not in prefixes:
            prefixes.append(prefix)
    return tuple(prefixes)


def _connection_vendor(using: str) -> str:
    from django.db import connections
    from django.utils.connection import ConnectionDoesNotExist

    if not isinstance(using, str) or not using:
        raise ConfigurationError(f"using must name a database alias, got {using!r}")
    try:
        return connections[using].vendor
    except ConnectionDoesNotExist:
        raise ConfigurationError(f"database alias {using!r} is not in settings.DATABASES") from None


def _erased_error(error: str) -> str:
    """A job's error (``"<what failed>: <message>"``) without its message, which may quote
    the conversation or the model's reply."""
    return error.split(_ERROR_MESSAGE, 1)[0] + ": (message erased with the subject)"


def _erase(
    tenant: str,
    subject: str,
    prefixes: tuple[Namespace, ...],
    using: str,
    held: list[tuple[TenantDatabase, str]],
    *,
    dry_run: bool,
) -> dict[str, int]:
    """Count (and unless ``dry_run`` remove) the subject's rows; run inside tenant_atomic.
    The session-level locks it takes (MySQL/MariaDB) are added to ``held``, for the
    caller to release once the transaction has ended."""
    from django.db.models import Q

    from tulip_memory.delta.orm import ORMDeltaStorage
    from tulip_memory.models import (
        CheckpointRecord,
        DeltaBlock,
        DeltaCheckpointRecord,
        ExtractionJob,
        ExtractionQueue,
        LangGraphCheckpoint,
        MemoryItem,
        namespace_prefix_condition,
    )
    from tulip_memory.models.erasure import COUNT_KEYS

    counts = dict.fromkeys(COUNT_KEYS, 0)
    under = namespace_prefix_condition(prefixes)
    items = MemoryItem.objects.using(using).filter(tenant=tenant).filter(under)
    versions = items.filter(namespace__contains=_HISTORY_MARK).count()
    counts["memory_versions"] = versions
    counts["memories"] = items.count() - versions
    queues = ExtractionQueue.objects.using(using).filter(tenant=tenant).filter(under)
    jobs = (
        ExtractionJob.objects.using(using)
        .filter(tenant=tenant, queue__in=queues.values("pk"))
        .exclude(payload__has_key="erased")
    )
    # The admin log's entries of these rows: by id, and (for memories, which may be
    # gone already) by the object name Django's own form gives them (their ``str()``).
    logged = {
        MemoryItem: list(items.values_list("pk", flat=True)),
        ExtractionQueue: list(queues.values_list("pk", flat=True)),
        ExtractionJob: list(
            ExtractionJob.objects.using(using)
            .filter(tenant=tenant, queue__in=queues.values("pk"))
            .values_list("pk", flat=True)
        ),
    }
    named: dict[Any, list[str]] = {MemoryItem: [encode_namespace(p) for p in prefixes]}
    counts["admin_log_entries"] = scrub_entries(using, logged, named, dry_run=dry_run)
    if dry_run:
        counts["extraction_payloads"] = jobs.count()
    else:
        items.clear()
        counts["extraction_payloads"] = jobs.update(payload=ERASED_PAYLOAD)
        # A worker running one of these jobs already holds its messages: its lease is
        # revoked, so its check right before saving fails and it saves nothing (the job
        # runs again later, on the erased payload, and saves nothing either).
        queues.exclude(lease_owner="").update(lease_owner="", lease_expires_at=None)
        failed = ExtractionJob.objects.using(using).filter(
            tenant=tenant, queue__in=queues.values("pk"), error__contains=_ERROR_MESSAGE
        )
        for pk, error in list(failed.values_list("pk", "error")):
            failed.filter(pk=pk).update(error=_erased_error(error))
        for pk in logged[ExtractionQueue]:
            erased = encode_namespace((tenant, ERASED_QUEUE_LABEL, uuid.uuid4().hex))
            queues.filter(pk=pk).update(namespace=erased)

    # Whole threads: every table of a checkpointer, for the threads tagged in its own
    # table. Every row is read, through managers that hide none: a LangGraph row holding
    # only pending writes (its checkpoint not stored yet) carries the subject its
    # writes' run named, and the conversation.
    everything = Q()
    tables: list[tuple[Any, tuple[tuple[str, Any, Q], ...]]] = [
        (CheckpointRecord.objects, (("checkpoints", CheckpointRecord, everything),)),
        (
            DeltaCheckpointRecord.objects,
            (
                ("delta_checkpoints", DeltaCheckpointRecord, everything),
                ("delta_blocks", DeltaBlock, everything),
            ),
        ),
    ]
    if _connection_vendor(using) == "postgresql":  # the LangGraph tables are PostgreSQL's
        tables.append(
            (
                LangGraphCheckpoint.rows,
                (
                    ("langgraph_checkpoints", LangGraphCheckpoint, Q(data__isnull=False)),
                    ("langgraph_pending_writes", LangGraphCheckpoint, Q(data__isnull=True)),
                ),
            )
        )
    for tagged, parts in tables:
        threads = tagged.using(using).threads_of_subject(tenant, subject)
        if not threads:
            continue
        if tagged.model is DeltaCheckpointRecord and not dry_run:
            # A delta checkpointer appends to a thread it has cached without reading it
            # again, under the thread's writer lock: held here, a save under way ends
            # first, and one that comes later finds the thread gone (it stores a whole
            # checkpoint), instead of appending a delta to the deleted rows.
            locks = ORMDeltaStorage(using, tenant=tenant)
            held.extend((locks, name) for name in locks.lock_threads(tenant, threads))
        for key, model, condition in parts:
            rows = model._base_manager.using(using).filter(
                condition, tenant=tenant, thread_id__in=threads
            )
            counts[key] = rows.count() if dry_run else rows.delete()[0]
    return counts


def forget_subject(
    tenant: str,
    subject: str,
    *,
    dry_run: bool = False,
    actor: object = None,
    namespace_prefixes: Sequence[tuple[str, ...]] = (),
    using: str = "default",
) -> ErasureReport:
    """Erase ``subject`` from ``tenant`` (see the module's docstring); the report.

    ``namespace_prefixes``: more namespaces holding the subject's memories, each a tuple
    of labels after the tenant. ``actor``: who asks (a string, or a user: stored as its
    name and id). ``using``: the database alias. Everything is validated before the first
    query; a failure rolls the whole erasure back (nothing removed, no receipt). Raises
    ValueError for a bad tenant, subject, prefix or actor, ConfigurationError for an
    unknown alias, TenantError when another tenant is bound (:func:`tenant_context`).
    """
    from tulip_memory.models import ErasureReceipt, subject_reference

    tenant = validate_tenant(tenant)
    subject = validate_subject(subject)
    prefixes = _prefixes(tenant, subject, namespace_prefixes)
    label = _actor_label(actor)
    _connection_vendor(using)
    refuse_another_tenant(tenant, "erasure is for tenant")
    reference = subject_reference(tenant, subject)
    started = time.perf_counter()
    receipt = None
    held: list[tuple[TenantDatabase, str]] = []
    try:
        with tenant_atomic(tenant, using=using):
            counts = _erase(tenant, subject, prefixes, using, held, dry_run=dry_run)
            if not dry_run:
                receipt = ErasureReceipt.objects.using(using).create(
                    tenant=tenant, subject_ref=reference, counts=counts, actor=label
                )
    finally:
        for locks, name in held:
            locks.unlock_threads([name])
    report = ErasureReport(tenant, reference, counts, prefixes, dry_run, receipt)
    if receipt is not None:
        emit_on_commit(
            using,
            EV_STORE_SUBJECT_FORGOTTEN,
            sender=ErasureReceipt,
            tenant=tenant,
            receipt=receipt.pk,
            counts=dict(counts),
            total=report.total,
            duration_ms=elapsed_ms(started),
        )
    return report


async def aforget_subject(
    tenant: str,
    subject: str,
    *,
    dry_run: bool = False,
    actor: object = None,
    namespace_prefixes: Sequence[tuple[str, ...]] = (),
    using: str = "default",
) -> ErasureReport:
    """:func:`forget_subject` for async callers (the ORM work runs off the event loop)."""
    return await sync_to_async(forget_subject)(
        tenant,
        subject,
        dry_run=dry_run,
        actor=actor,
        namespace_prefixes=namespace_prefixes,
        using=using,
    )
