"""Admin of DjangoSaver's rows, read-only: one row per thread (or every checkpoint); a
checkpoint's page shows its timeline and its values, writes and metadata as the saver reads
them (:meth:`LangGraphCheckpointAdmin.saver`). Hidden where the table is not on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from django.contrib import admin
from django.db import connections, router
from django.db.models import QuerySet
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.checkpoints import (
    ChainAdmin,
    change_link,
    render_chat,
    timeline_window,
    unreadable,
)
from tulip_memory.admin.tenancy import TwoViewFilter, column
from tulip_memory.exceptions import CheckpointCorruptError
from tulip_memory.models import LangGraphCheckpoint

__all__ = ["LangGraphCheckpointAdmin", "ThreadsOrCheckpointsFilter"]

# LangChain's message types and the roles our chat view shows them as.
ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


class ThreadsOrCheckpointsFilter(TwoViewFilter):
    """Threads (the newest checkpoint of each, with the thread's totals) or every checkpoint."""

    title = _("threads or checkpoints")
    parameter_name = "show"
    other = CHECKPOINTS = "checkpoints"
    labels = (_("threads"), _("every checkpoint"))
    # The columns differ between the two: a sort by column number does not carry over.
    reset = ("o",)

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        if self.value() == self.CHECKPOINTS:
            return queryset
        return queryset.newest_of_threads()  # type: ignore[attr-defined]


def branches(rows: list[tuple[Any, ...]]) -> list[tuple[int, bool]]:
    """Per timeline row ``(pk, namespace, checkpoint_id, parent_id, ...)``, oldest first: its
    branch (0: the thread's first line) and whether it starts one. A checkpoint whose parent
    already has a child (a replay or an ``update_state`` from an older checkpoint) forks a
    new branch; the rest continue their parent's."""
    branch_of: dict[tuple[str, str], int] = {}
    has_child: set[tuple[str, str]] = set()
    found, count = [], 0
    for _pk, namespace, checkpoint_id, parent_id, *_rest in rows:
        parent = (namespace, parent_id)
        fork = bool(parent_id) and parent in has_child
        if fork:
            count += 1
        branch = count if fork else branch_of.get(parent, 0)
        if parent_id:
            has_child.add(parent)
        branch_of[(namespace, checkpoint_id)] = branch
        found.append((branch, fork))
    return found


def _shows_threads(request: Any) -> bool:
    return request.GET.get(ThreadsOrCheckpointsFilter.parameter_name) is None


def message_view(message: Any) -> dict[str, Any]:
    """A LangChain message as :func:`~tulip_memory.admin.checkpoints.render_chat` shows it."""
    content = message.content
    if not isinstance(content, str):  # content blocks: their text, the rest as JSON
        content = "\n".join(
            block if isinstance(block, str) else block.get("text") or _json(block)
            for block in content
        )
    return {
        "role": ROLES.get(message.type, message.type),
        "content": content,
        "name": message.name or "",
        "tool_call_id": getattr(message, "tool_call_id", "") or "",
        "tool_calls": [
            {
                "id": call.get("id") or "",
                "name": call["name"],
                "arguments": json.dumps(call.get("args", {}), ensure_ascii=False),
            }
            for call in getattr(message, "tool_calls", None) or ()
        ],
        "metadata": "",
    }


def _is_message_list(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, BaseMessage) for item in value)
    )


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    return repr(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=_jsonable)


def render_value(value: Any, parent: Any = None, *, diff: bool = False, dom_id: str = "") -> str:
    """A channel's value: a message list as a chat (``diff``: against ``parent``'s), else JSON."""
    if _is_message_list(value):
        return render_chat(
            [message_view(m) for m in value],
            [message_view(m) for m in parent] if diff and _is_message_list(parent) else None,
            diff=diff,
            dom_id=dom_id,
        )
    return format_html('<pre class="tulip-pre">{}</pre>', _json(value))


@admin.register(LangGraphCheckpoint)
class LangGraphCheckpointAdmin(ChainAdmin):
    parent_field = "parent_checkpoint_id"
    same = ("checkpoint_ns",)
    deferred = ("data", "writes")
    # Checkpoint ids sort in time order; row ids do not: a row may be created by pending
    # writes that arrive before their checkpoint.
    thread_order = ("checkpoint_id", "checkpoint_ns")

    def _table_exists(self) -> bool:
        """The saver's table is PostgreSQL's (migration ``0007``): on a site whose database
        for it is another vendor, the pages are hidden, not a 500."""
        return connections[router.db_for_read(self.model)].vendor == "postgresql"

    def has_module_permission(self, request: Any) -> bool:
        return self._table_exists() and super().has_module_permission(request)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        return self._table_exists() and super().has_view_permission(request, obj)

    list_display = ("checkpoint_id", "thread_id", "checkpoint_ns", "parent_link", "created_at")
    thread_list_display = ("thread_id", "checkpoint_count", "newest", "thread_bytes")
    list_filter = (ThreadsOrCheckpointsFilter,)
    search_fields = ("thread_id", "checkpoint_id")
    show_full_result_count = False  # the full count is of checkpoints, not of threads
    # Checkpoint ids sort in time order (newest first); row ids need not (see _thread).
    ordering = ("-checkpoint_id", "-id")
    fields = readonly_fields = (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "step",
        "source",
        "parent_link",
        "children_links",
        "created_at",
        "channel_values",
        "pending_writes",
        "pretty_metadata",
        "thread_timeline",
        "thread_storage",
    )

    # --- the list -------------------------------------------------------------------------

    def get_list_display(self, request: Any) -> Any:
        return self.thread_list_display if _shows_threads(request) else self.list_display

    def changelist_view(self, request: Any, extra_context: Any = None) -> Any:
        if _shows_threads(request):
            extra_context = {**(extra_context or {}), "title": gettext("LangGraph threads")}
        return super().changelist_view(request, extra_context)

    checkpoint_count = column("checkpoint_total", _("checkpoints"))
    newest = column("created_at", _("newest"))
    thread_bytes = column("stored_bytes", _("bytes"))

    # --- reading through the saver --------------------------------------------------------

    def saver(self, obj: LangGraphCheckpoint) -> Any:
        """The saver whose load path and serializer read ``obj`` (ImportError without LangGraph)."""
        from tulip_memory.langgraph import DjangoSaver

        return DjangoSaver(obj._state.db or "default", tenant=obj.tenant)

    def _loaded(self, obj: LangGraphCheckpoint) -> tuple[Any, Any, str]:
        """(the checkpoint's tuple, its parent's, why they could not be read), once per page."""
        cached = getattr(obj, "_tulip_loaded", None)
        if cached is None:
            try:
                saver = self.saver(obj)
                parent_pk = getattr(obj, "parent_pk", None)
                found = saver.read_rows(obj.tenant, [obj.pk, *([parent_pk] if parent_pk else [])])
                cached = (found.get(obj.pk), found.get(parent_pk), "")
                if cached[0] is None:
                    cached = (None, None, gettext("the checkpoint is gone"))
            except ImportError as exc:
                cached = (None, None, str(exc))
            except (CheckpointCorruptError, TypeError, ValueError) as exc:
                cached = (None, None, gettext("the checkpoint could not be read: %s") % exc)
            obj._tulip_loaded = cached  # type: ignore[attr-defined]
        return cached

    def _metadata(self, obj: LangGraphCheckpoint) -> dict[str, Any] | None:
        """The checkpoint's metadata: from its tuple, else decoded from its row (a damaged
        channel value leaves it readable); None when that fails too."""
        found = self._loaded(obj)[0]
        if found is not None:
            return dict(found.metadata)
        record = self._thread(obj).records().get(obj.pk)
        if record is None:
            return None
        try:
            decoded = self.saver(obj).serde.loads_typed((record.metadata_type, record.metadata))
        except Exception:  # any failure of a serializer on damaged bytes
            return None
        return dict(decoded) if isinstance(decoded, dict) else None

    @admin.display(description=_("step"))
    def step(self, obj: LangGraphCheckpoint) -> Any:
        return (self._metadata(obj) or {}).get("step", "-")

    @admin.display(description=_("source"))
    def source(self, obj: LangGraphCheckpoint) -> Any:
        return (self._metadata(obj) or {}).get("source", "-")

    @admin.display(description=_("channel values"))
    def channel_values(self, obj: LangGraphCheckpoint) -> str:
        found, parent = self._loaded(obj)[:2]
        if found is None:
            return unreadable(self._loaded(obj)[2])
        values = found.checkpoint["channel_values"]
        before = parent.checkpoint["channel_values"] if parent is not None else {}
        return render_to_string(
            "admin/tulip_memory/langgraph_channels.html",
            {
                "channels": [
                    {
                        "name": name,
                        "html": render_value(
                            values[name],
                            before.get(name),
                            diff=True,
                            dom_id="tulip-conversation" if index == 0 else "",
                        ),
                    }
                    for index, name in enumerate(sorted(values, key=lambda n: n != "messages"))
                ]
            },
        )

    @admin.display(description=_("pending writes"))
    def pending_writes(self, obj: LangGraphCheckpoint) -> str:
        found = self._loaded(obj)[0]
        if found is None:
            return unreadable(self._loaded(obj)[2])
        return render_to_string(
            "admin/tulip_memory/langgraph_writes.html",
            {
                "writes": [
                    {"task_id": task_id, "channel": channel, "html": render_value(value)}
                    for task_id, channel, value in found.pending_writes or ()
                ]
            },
        )

    @admin.display(description=_("metadata"))
    def pretty_metadata(self, obj: LangGraphCheckpoint) -> str:
        metadata = self._metadata(obj)
        if metadata is None:
            return unreadable(self._loaded(obj)[2])
        return format_html('<pre class="tulip-pre">{}</pre>', _json(metadata))

    # --- the thread -----------------------------------------------------------------------

    @admin.display(description=_("the thread's checkpoints (oldest first)"))
    def thread_timeline(self, obj: LangGraphCheckpoint) -> str:
        thread = self._thread(obj)
        rows = list(
            thread.values_list(
                "pk", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "created_at"
            )
        )
        pk_of = {(ns, checkpoint_id): pk for pk, ns, checkpoint_id, *_ in rows}
        try:
            loads = self.saver(obj).serde.loads_typed
            records = thread.records()
        except ImportError:
            loads, records = None, {}
        marked = [(*row, *mark) for row, mark in zip(rows, branches(rows), strict=True)]
        window = timeline_window(
            obj,
            marked,
            [row[0] for row in rows],
            **{ThreadsOrCheckpointsFilter.parameter_name: ThreadsOrCheckpointsFilter.CHECKPOINTS},
        )
        entries = []
        for pk, ns, checkpoint_id, parent_id, created, branch, fork in window["rows"]:
            decoded = {}
            if loads is not None and (record := records.get(pk)) is not None:
                decoded = loads((record.metadata_type, record.metadata))
            entries.append(
                {
                    "link": change_link(LangGraphCheckpoint, pk, checkpoint_id),
                    "namespace": ns,
                    "step": decoded.get("step", "-"),
                    "source": decoded.get("source", "-"),
                    "parent": change_link(
                        LangGraphCheckpoint, pk_of.get((ns, parent_id)), parent_id
                    ),
                    "created": created,
                    "current": pk == obj.pk,
                    "branch": branch,
                    "fork": fork,
                }
            )
        return render_to_string(
            "admin/tulip_memory/langgraph_timeline.html",
            {**window, "rows": entries, "forked": any(fork for *_, fork in marked)},
        )

    @admin.display(description=_("the thread's storage"))
    def thread_storage(self, obj: LangGraphCheckpoint) -> str:
        thread = (
            LangGraphCheckpoint.objects.using(obj._state.db)
            .filter(tenant=obj.tenant, thread_id=obj.thread_id)
            .newest_of_threads()
            .first()
        )
        count = getattr(thread, "checkpoint_total", 0)
        return format_html(
            ngettext(
                "{count} checkpoint, {bytes} bytes stored (checkpoint, values and writes)",
                "{count} checkpoints, {bytes} bytes stored (checkpoints, values and writes)",
                count,
            ),
            count=count,
            bytes=getattr(thread, "stored_bytes", 0),
        )
