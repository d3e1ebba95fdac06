"""Admin of the checkpointers' rows, read-only and tenant-scoped: each checkpoint opens to
the chat it holds with what changed since its parent; chain rows also show the thread's
timeline, storage totals, parent and children (:class:`ChainAdmin`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.db import models
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ListQuerysetMixin, ReadOnlyTenantAdmin, column
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.messages import Message
from tulip_memory.models import CheckpointRecord, DeltaBlock, DeltaCheckpointRecord
from tulip_memory.state import AgentState

# A checkpoint as the admin read it: its state, or None and why it could not be read.
Read = tuple[AgentState | None, str]
NOT_READ: Read = (None, "")
# Checkpoints a thread's timeline shows on each side of the page's own (the list has all).
TIMELINE_WINDOW = 10

__all__ = [
    "ChainAdmin",
    "CheckpointRecordAdmin",
    "DeltaBlockAdmin",
    "DeltaCheckpointRecordAdmin",
    "NoHistoryAdminMixin",
]


def admin_url(model: type[models.Model], view: str, *args: Any) -> str:
    """The URL of ``model``'s admin ``view`` ("change", "changelist", ...)."""
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def change_link(model: type[models.Model], pk: Any, label: str) -> str:
    """A link to the admin page of ``model``'s row ``pk`` (just ``label`` without a pk)."""
    if pk is None:
        return label or "-"
    return format_html('<a href="{}">{}</a>', admin_url(model, "change", pk), label)


def render_conversation(
    state: Read, parent: Read, parent_name: str = "", *, diff: bool = True
) -> str:
    """``state``'s messages as a chat, with ``diff`` those not in ``parent`` marked as added;
    an unreadable one (a :data:`Read` without state) shows why."""
    found, problem = state
    if found is None:
        return unreadable(gettext("the checkpoint could not be read: %s") % problem)
    before, parent_problem = parent
    chat = render_chat(
        [_message_view(m) for m in found.messages],
        [_message_view(m) for m in before.messages] if before is not None else None,
        json.dumps(found.metadata, ensure_ascii=False, indent=2) if found.metadata else "",
        diff=diff and not parent_problem,
    )
    if not parent_problem:
        return chat
    note = gettext("its %(parent)s could not be read: %(problem)s") % {
        "parent": parent_name or gettext("parent"),
        "problem": parent_problem,
    }
    return format_html("{}{}", unreadable(note), chat)


def unreadable(reason: str) -> str:
    return format_html('<p class="tulip-meta tulip-unread">{}</p>', reason)


def render_chat(
    messages: list[dict[str, Any]],
    parent: list[dict[str, Any]] | None,
    metadata: str = "",
    *,
    diff: bool = True,
    dom_id: str = "tulip-conversation",
) -> str:
    """Message views (role, content, name, tool_call_id, tool_calls, metadata) as a chat;
    with ``diff``, those after the prefix shared with ``parent`` are marked, counted and
    linked (``<dom_id>-first-added``); ``metadata`` is shown below."""
    shared = 0
    if parent is not None:
        for mine, theirs in zip(messages, parent, strict=False):
            if mine != theirs:
                break
            shared += 1
    first_added = shared if parent is not None and shared < len(messages) and dom_id else None
    return render_to_string(
        "admin/tulip_memory/conversation.html",
        {
            "messages": [
                {**m, "added": index >= shared and parent is not None}
                for index, m in enumerate(messages)
            ],
            "metadata": metadata,
            "diff": diff,
            "dom_id": dom_id,
            "first_added": first_added,
            "has_parent": parent is not None,
            "added": len(messages) - shared if parent is not None else len(messages),
            "removed": len(parent) - shared if parent is not None else 0,
        },
    )


def _message_view(message: Message) -> dict[str, Any]:
    return {
        "role": message.role.value,
        "content": message.content,
        "name": message.name,
        "tool_call_id": message.tool_call_id,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}
            for c in message.tool_calls
        ],
        "metadata": json.dumps(message.metadata, ensure_ascii=False) if message.metadata else "",
    }


def timeline_window(obj: Any, rows: list[Any], pks: list[Any], **params: str) -> dict[str, Any]:
    """The context of ``obj``'s thread's timeline: ``rows`` (the thread's, oldest first, of
    primary keys ``pks``) within ``TIMELINE_WINDOW`` of ``obj``'s, how many are left out
    before and after, and the URL of the thread's rows in the list (``params`` added to it)."""
    current = pks.index(obj.pk) if obj.pk in pks else 0
    start = max(current - TIMELINE_WINDOW, 0)
    end = current + TIMELINE_WINDOW + 1
    url = admin_url(type(obj), "changelist")
    return {
        "rows": rows[start:end],
        "earlier": start,
        "later": max(len(rows) - end, 0),
        "total": len(rows),
        "full_list": f"{url}?{urlencode({**params, 'thread_id': obj.thread_id})}",
    }


class NoHistoryAdminMixin:
    """No "History" button: these rows are never edited in the admin, so its log is empty;
    the history URL, typed, redirects to the row's page."""

    change_form_template: ClassVar[Any] = "admin/tulip_memory/change_form_no_history.html"

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        return HttpResponseRedirect(admin_url(self.model, "change", object_id))  # type: ignore[attr-defined]


def sibling_pk(model: type[models.Model], field: str, *same: str) -> Subquery:
    """The pk of the row of the same tenant and thread (and ``same`` fields) whose
    checkpoint_id is ``field``."""
    return Subquery(
        model._default_manager.filter(
            tenant=OuterRef("tenant"),
            thread_id=OuterRef("thread_id"),
            checkpoint_id=OuterRef(field),
            **{name: OuterRef(name) for name in same},
        ).values("pk")[:1]
    )


class ChainAdmin(NoHistoryAdminMixin, ReadOnlyTenantAdmin):
    """The pages of a checkpoint chain's rows: read-only, one tenant, heavy columns
    deferred, links to a row's parent and children by ``parent_field`` (within the
    ``same`` fields)."""

    parent_field: ClassVar[str]
    same: ClassVar[tuple[str, ...]] = ()
    deferred: ClassVar[tuple[str, ...]] = ("data",)

    def get_queryset(self, request: Any) -> Any:
        parent = sibling_pk(self.model, self.parent_field, *self.same)
        return super().get_queryset(request).defer(*self.deferred).annotate(parent_pk=parent)

    # A thread's rows, for the children links and the timeline: in this order, these
    # columns deferred.
    thread_order: ClassVar[tuple[str, ...]] = ("id",)
    thread_deferred: ClassVar[tuple[str, ...]] = ()

    def _thread(self, obj: Any) -> Any:
        rows = self.model.objects.using(obj._state.db).of_thread(obj.tenant, obj.thread_id)
        return rows.defer(*self.thread_deferred).order_by(*self.thread_order)

    @admin.display(description=_("parent"))
    def parent_link(self, obj: Any) -> str:
        # A root's parent id is "", which no row has: shown as "-".
        parent_id = getattr(obj, self.parent_field)
        return change_link(self.model, getattr(obj, "parent_pk", None), parent_id)

    @admin.display(description=_("children"))
    def children_links(self, obj: Any) -> str:
        same = {name: getattr(obj, name) for name in self.same}
        children = self._thread(obj).filter(**{self.parent_field: obj.checkpoint_id}, **same)
        links = [change_link(self.model, c.pk, c.checkpoint_id) for c in children]
        return format_html(", ".join(["{}"] * len(links)), *links) if links else "-"


class MessageCount(models.Func):
    """The length of the JSON array under ``"messages"`` of a JSON column; NULL when it
    is not an array. PostgreSQL, MySQL and MariaDB (the checkpoint table lives on both),
    and SQLite (JSON1, the default template)."""

    template = (
        "CASE WHEN json_type(%(expressions)s, '$.messages') = 'array' "
        "THEN json_array_length(%(expressions)s, '$.messages') END"
    )
    vendor_templates = {
        "postgresql": "CASE WHEN jsonb_typeof(%(expressions)s -> 'messages') = 'array' "
        "THEN jsonb_array_length(%(expressions)s -> 'messages') END",
        "mysql": "CASE WHEN JSON_TYPE(JSON_EXTRACT(%(expressions)s, '$.messages')) = 'ARRAY' "
        "THEN JSON_LENGTH(%(expressions)s, '$.messages') END",
    }
    output_field = models.IntegerField()
    arity = 1

    def _as_vendor(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = self.vendor_templates[connection.vendor]
        return self.as_sql(compiler, connection, template=template, **extra)

    as_postgresql = as_mysql = _as_vendor


@admin.register(CheckpointRecord)
class CheckpointRecordAdmin(NoHistoryAdminMixin, ListQuerysetMixin, ReadOnlyTenantAdmin):
    """Plain checkpoints: full snapshots, each shown as the chat it holds."""

    list_display = ("checkpoint_id", "thread_id", "message_count", "created_at")
    # No thread filter: it would list every thread of the tenant (the search box finds one).
    search_fields = ("thread_id", "checkpoint_id")
    date_hierarchy = "created_at"
    ordering = ("-id",)
    fields = ("thread_id", "checkpoint_id", "created_at", "parent_link", "conversation")
    readonly_fields = fields

    def get_list_queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        # The state (the whole conversation) stays in the database, which counts its messages.
        return queryset.defer("state").annotate(messages=MessageCount("state"))

    @admin.display(description=_("messages"))
    def message_count(self, obj: CheckpointRecord) -> int | str:
        count = getattr(obj, "messages", None)
        return "-" if count is None else count

    def _parent(self, obj: CheckpointRecord) -> CheckpointRecord | None:
        return (
            CheckpointRecord.objects.using(obj._state.db)
            .of_thread(obj.tenant, obj.thread_id)
            .filter(id__lt=obj.id)
            .newest_first()
            .first()
        )

    @admin.display(description=_("previous checkpoint of the thread"))
    def parent_link(self, obj: CheckpointRecord) -> str:
        parent = self._parent(obj)
        return change_link(CheckpointRecord, parent.pk, parent.checkpoint_id) if parent else "-"

    @admin.display(description=_("conversation"))
    def conversation(self, obj: CheckpointRecord) -> str:
        parent = self._parent(obj)
        return render_conversation(
            read_state(obj.state),
            read_state(parent.state) if parent is not None else NOT_READ,
            gettext("predecessor"),
        )


def read_state(data: Any) -> Read:
    """The state of ``data`` (a checkpoint's JSON), or why it is not one."""
    try:
        return AgentState.from_checkpoint(data), ""
    except (TypeError, ValueError, KeyError) as exc:
        return None, str(exc)


@admin.register(DeltaCheckpointRecord)
class DeltaCheckpointRecordAdmin(ChainAdmin):
    """Delta checkpoints: chains of a thread, each checkpoint shown as the chat it rebuilds."""

    parent_field = "parent_id"
    thread_deferred = ("data",)

    list_display = (
        "checkpoint_id",
        "thread_id",
        "kind",
        "depth",
        "parent_link",
        "base_link",
        "stored_bytes",
        "created_at",
    )
    # No thread filter: it would list every thread of the tenant (the search box finds one).
    list_filter = ("is_full",)
    search_fields = ("thread_id", "checkpoint_id", "parent_id", "base_id")
    ordering = ("-id",)
    fields = readonly_fields = (
        "thread_id",
        "checkpoint_id",
        "kind",
        "chain_depth",
        "parent_link",
        "children_links",
        "size_bytes",
        "compressed_size_bytes",
        "created_at",
        "conversation",
        "thread_timeline",
        "thread_storage",
    )

    def get_queryset(self, request: Any) -> Any:
        base = sibling_pk(DeltaCheckpointRecord, "base_id")
        return super().get_queryset(request).annotate(base_pk=base)

    @admin.display(description=_("kind"), ordering="is_full")
    def kind(self, obj: DeltaCheckpointRecord) -> str:
        return gettext("full") if obj.is_full else gettext("delta")

    depth = column("chain_depth", _("depth"))
    stored_bytes = column("compressed_size_bytes", _("bytes"))

    @admin.display(description=_("chain root"))
    def base_link(self, obj: DeltaCheckpointRecord) -> str:
        return change_link(DeltaCheckpointRecord, getattr(obj, "base_pk", None), obj.base_id)

    def _checkpointer(self, obj: DeltaCheckpointRecord) -> Any:
        from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage

        return DeltaCheckpointer(ORMDeltaStorage(obj._state.db or "default", tenant=obj.tenant))

    @admin.display(description=_("conversation"))
    def conversation(self, obj: DeltaCheckpointRecord) -> str:
        checkpointer = self._checkpointer(obj)

        def read(checkpoint_id: str) -> Read:
            """NOT_READ when the checkpoint is gone (deleted meanwhile)."""
            try:
                return async_to_sync(checkpointer.load)(obj.thread_id, checkpoint_id), ""
            except (CheckpointCorruptError, TypeError, ValueError) as exc:
                return None, str(exc)

        state = read(obj.checkpoint_id)
        if state == NOT_READ:
            state = (None, gettext("it is gone"))
        return render_conversation(state, read(obj.parent_id) if obj.parent_id else NOT_READ)

    @admin.display(description=_("the thread's checkpoints (oldest first)"))
    def thread_timeline(self, obj: DeltaCheckpointRecord) -> str:
        rows = list(self._thread(obj))
        window = timeline_window(obj, rows, [row.pk for row in rows])
        window["rows"] = [
            {
                "link": change_link(DeltaCheckpointRecord, row.pk, row.checkpoint_id),
                "kind": self.kind(row),
                "row": row,
                "current": row.pk == obj.pk,
            }
            for row in window["rows"]
        ]
        return render_to_string("admin/tulip_memory/thread_timeline.html", window)

    @admin.display(description=_("the thread's storage"))
    def thread_storage(self, obj: DeltaCheckpointRecord) -> str:
        stats = async_to_sync(self._checkpointer(obj).get_storage_stats)(obj.thread_id)
        checkpoints = ngettext(
            "%(count)d checkpoint (%(full)d full, %(delta)d delta)",
            "%(count)d checkpoints (%(full)d full, %(delta)d delta)",
            stats["total_checkpoints"],
        ) % {
            "count": stats["total_checkpoints"],
            "full": stats["full_checkpoints"],
            "delta": stats["delta_checkpoints"],
        }
        blocks = ngettext("%(count)d block", "%(count)d blocks", stats["blocks"]) % {
            "count": stats["blocks"]
        }
        return format_html(
            gettext(
                "{checkpoints} and {blocks}: {encoded} bytes encoded, {stored} bytes stored "
                "(ratio {ratio})"
            ),
            checkpoints=checkpoints,
            blocks=blocks,
            encoded=stats["total_size"],
            stored=stats["compressed_size"],
            ratio=f"{stats['compression_ratio']:.2f}",
        )


@admin.register(DeltaBlock)
class DeltaBlockAdmin(NoHistoryAdminMixin, ReadOnlyTenantAdmin):
    list_display = ("digest", "thread_id", "size_bytes", "created_at")
    search_fields = ("thread_id", "digest")
    ordering = ("-id",)
    exclude = ("data",)
