"""Admin of the store layer: PgMemory's live memories, one tenant at a time.

* the list shows live memories only (a memory's past versions, kept by the memory
  manager under ``(*prefix, "_history", type, key)``, appear on its page instead), with
  filters by namespace prefix, memory type and embedding source, and the memory's
  content as text;
* the search box ranks like the agent does — the store's own search statement
  (:meth:`~tulip_memory.models.store.MemoryItemQuerySet.search_paths`, with PgMemory's
  query encoder) over the tenant's namespaces — and shows each hit's score; the list
  then says it is ranked by relevance and its columns do not sort;
* a memory's page shows its value and metadata as pretty JSON and its versions as a
  timeline;
* **Forget** is the one write: an action gated by the ``forget_memoryitem`` permission,
  confirmed on a page that lists the memories and the history rows that go with them,
  recorded in Django's admin log.

Registered on the default site and meant to be subclassed (unregister, then register your
subclass). Tenant scoping: :class:`~tulip_memory.admin.tenancy.TenantScopedAdminMixin`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ORDER_VAR
from django.db.models import Case, FloatField, Q, QuerySet, Value, When
from django.db.models.functions import Cast
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ReadOnlyAdminMixin, TenantScopedAdminMixin
from tulip_memory.manager.history import CONTENT_SINCE, HISTORY_LABEL
from tulip_memory.manager.types import MemoryType
from tulip_memory.models.store import MemoryItem
from tulip_memory.namespaces import NAMESPACE_SEPARATOR, decode_namespace, encode_namespace

__all__ = ["MemoryItemAdmin"]

# Hits the search box shows (it ranks as PgMemory.search does).
SEARCH_LIMIT = 50
# Characters of a memory's content shown in the list (the page shows all of it).
LIST_CONTENT_CHARS = 200
_HISTORY_MARK = f"{NAMESPACE_SEPARATOR}{HISTORY_LABEL}{NAMESPACE_SEPARATOR}"


def content_text(value: Any) -> str:
    """A memory's value as text: its ``content`` (or ``text``) field, else compact JSON."""
    if isinstance(value, dict):
        for field in ("content", "text"):
            if isinstance(value.get(field), str):
                return value[field]
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def history_path(item: MemoryItem) -> str | None:
    """The namespace path of ``item``'s past versions (None for a one-label namespace)."""
    namespace = decode_namespace(item.namespace)
    if len(namespace) < 2:
        return None
    return encode_namespace((*namespace[:-1], HISTORY_LABEL, namespace[-1], item.key))


def _pretty(value: Any) -> str:
    return format_html(
        '<pre class="tulip-pre">{}</pre>', json.dumps(value, ensure_ascii=False, indent=2)
    )


class NamespacePrefixFilter(admin.SimpleListFilter):
    """Memories under a namespace prefix (every prefix of the tenant's namespaces)."""

    title = _("namespace prefix")
    parameter_name = "namespace_prefix"
    max_choices = 100

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        paths = model_admin.get_queryset(request).values_list("namespace", flat=True).distinct()
        prefixes: set[str] = set()
        for path in paths[: self.max_choices]:
            labels = decode_namespace(path)
            prefixes.update(encode_namespace(labels[:n]) for n in range(1, len(labels) + 1))
        return [(p, p) for p in sorted(prefixes)]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        # Any text decodes to a namespace; one that matches nothing shows "0 memories".
        return queryset.under_prefix(decode_namespace(value))  # type: ignore[attr-defined]


class MemoryTypeFilter(admin.SimpleListFilter):
    """The memory manager's type: the last label of the memory's namespace."""

    title = _("memory type")
    parameter_name = "memory_type"
    OTHER = "-"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(t.value, t.value) for t in MemoryType] + [(self.OTHER, gettext("other"))]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        suffixes = [NAMESPACE_SEPARATOR + t.value for t in MemoryType]
        if value == self.OTHER:
            for suffix in suffixes:
                queryset = queryset.exclude(namespace__endswith=suffix)
            return queryset
        if value in {t.value for t in MemoryType}:
            return queryset.filter(namespace__endswith=NAMESPACE_SEPARATOR + value)
        return queryset


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """Browse one tenant's live memories; forget some (with the forget permission)."""

    # The embedding source is a filter and on the page: the list keeps room for the content.
    list_display = ("namespace", "key", "content", "version", "updated_at")
    list_display_links = ("key",)
    list_filter = (NamespacePrefixFilter, MemoryTypeFilter, "embedding_source")
    search_fields = ("key",)  # the box itself is answered by the store's search
    search_help_text = _("Ranked like the agent's recall (the store's own search).")
    ordering = ("namespace", "-updated_at", "key")
    list_per_page = 50
    actions = ["forget_memories"]
    fields = (
        "tenant",
        "namespace",
        "key",
        "pretty_value",
        "pretty_metadata",
        "versions",
        "embedding_source",
        "version",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    change_form_template = "admin/tulip_memory/memoryitem/change_form.html"

    def get_queryset(self, request: Any) -> Any:
        # Live memories only; the vector is wide and not shown: leave it in the database.
        queryset = (
            self.model._default_manager.get_queryset()
            .exclude(namespace__contains=_HISTORY_MARK)
            .defer("embedding")
        )
        scores = self._search_scores(request, queryset)
        if scores:
            queryset = queryset.annotate(
                search_score=Case(
                    *(When(pk=pk, then=Value(score)) for pk, score in scores.items()),
                    default=Value(0.0),
                    output_field=FloatField(),
                )
            )
        elif scores is not None:
            # No hit: a Case without a When is its default alone, and PostgreSQL refuses
            # ORDER BY a bare constant (a cast one is an expression).
            queryset = queryset.annotate(search_score=Cast(Value(0.0), FloatField()))
        # As ModelAdmin.get_queryset, but ordered after the score is annotated.
        return queryset.order_by(*self.get_ordering(request))

    def _search_scores(self, request: Any, queryset: QuerySet) -> dict[int, float] | None:
        """The search box's hits (pk → score), once per request; None without a query."""
        term = request.GET.get("q", "").strip()
        tenant = self.request_tenant(request)
        if not term or tenant is None:
            return None
        if not hasattr(request, "_tulip_scores"):
            request._tulip_scores = self._ranked(tenant, queryset.order_by(), term)
        return request._tulip_scores

    def get_search_results(
        self, request: Any, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        scores = self._search_scores(request, queryset)
        if scores is None:
            return queryset, False
        return queryset.filter(pk__in=list(scores)), False

    def _ranked(self, tenant: str, queryset: QuerySet, query: str) -> dict[int, float]:
        """pk → score of the top hits, as PgMemory.search ranks them: with words to rank
        by, the fused score (the rank is minus it); else the cosine similarity (the rank
        is the cosine distance)."""
        from tulip_memory.store.pg import PgMemory

        store = PgMemory(queryset.db)
        paths = sorted(set(queryset.values_list("namespace", flat=True)))
        ranking = async_to_sync(store.ranking_arguments)(tenant, query)
        rows = MemoryItem.objects.using(queryset.db).search_paths(
            tenant, paths, SEARCH_LIMIT, **ranking
        )
        rows = sorted(rows, key=lambda row: row.rank)[:SEARCH_LIMIT]
        fused = ranking.get("terms") is not None
        found = queryset.filter(
            tenant=tenant,
            namespace__in={paths[row.position] for row in rows},
            key__in={row.key for row in rows},
        ).values_list("pk", "namespace", "key")
        pk_of = {(namespace, key): pk for pk, namespace, key in found}
        return {
            pk_of[paths[row.position], row.key]: round(-row.rank if fused else 1.0 - row.rank, 4)
            for row in rows
            if (paths[row.position], row.key) in pk_of
        }

    def changelist_view(self, request: Any, extra_context: Any = None) -> Any:
        term = request.GET.get("q", "").strip()
        if term:
            # Ranked by score: a column's sort would reorder the hits, so it is off.
            if ORDER_VAR in request.GET:
                request.GET = request.GET.copy()
                del request.GET[ORDER_VAR]
            extra_context = {**(extra_context or {}), "tulip_ranked_by": term}
        return super().changelist_view(request, extra_context)

    def get_sortable_by(self, request: Any) -> Any:
        if request.GET.get("q", "").strip():
            return ()
        return super().get_sortable_by(request)

    def get_list_display(self, request: Any) -> Any:
        if request.GET.get("q", "").strip():
            return ("score", *self.list_display)
        return self.list_display

    def get_ordering(self, request: Any) -> Any:
        if request.GET.get("q", "").strip():
            return ("-search_score", "key")
        return super().get_ordering(request)

    @admin.display(description=_("score"))
    def score(self, item: MemoryItem) -> str:
        return f"{getattr(item, 'search_score', 0.0):.3f}"

    # --- reading ------------------------------------------------------------------------

    @admin.display(description=_("content"))
    def content(self, item: MemoryItem) -> str:
        text = content_text(item.value)
        return text if len(text) <= LIST_CONTENT_CHARS else text[: LIST_CONTENT_CHARS - 1] + "…"

    @admin.display(description=_("value"))
    def pretty_value(self, item: MemoryItem) -> str:
        return _pretty(item.value)

    @admin.display(description=_("metadata"))
    def pretty_metadata(self, item: MemoryItem) -> str:
        return _pretty(item.metadata)

    @admin.display(description=_("versions (oldest first)"))
    def versions(self, item: MemoryItem) -> str:
        past = self._history(item).order_by("key")
        entries = [
            (
                content_text(row.value),
                row.value.get("valid_from", "?") if isinstance(row.value, dict) else "?",
                row.value.get("valid_to", "?") if isinstance(row.value, dict) else "?",
                row.value.get("version", row.key) if isinstance(row.value, dict) else row.key,
                "",
            )
            for row in past
        ]
        since = item.value.get(CONTENT_SINCE) if isinstance(item.value, dict) else None
        entries.append(
            (
                content_text(item.value),
                since or item.updated_at.isoformat(),
                gettext("now"),
                item.version,
                "current",
            )
        )
        return format_html(
            '<ol class="tulip-timeline" id="tulip-versions">{}</ol>',
            format_html_join(
                "",
                '<li class="{4}"><span class="tulip-meta">v{3} · {1} → {2}</span><br>{0}</li>',
                ((c, _when(f), _when(t), v, cls) for c, f, t, v, cls in entries),
            ),
        )

    def _history(self, item: MemoryItem) -> QuerySet:
        path = history_path(item)
        rows = MemoryItem.objects.using(item._state.db)
        return rows.filter(tenant=item.tenant, namespace=path) if path else rows.none()

    # --- forgetting -----------------------------------------------------------------------

    def change_view(
        self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> Any:
        extra = {
            **(extra_context or {}),
            "has_forget_permission": self.has_forget_permission(request),
        }
        return super().change_view(request, object_id, form_url, extra)

    def has_forget_permission(self, request: Any) -> bool:
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.forget_{opts.model_name}")

    @admin.action(
        description=_("Forget the selected memories (and their history)"), permissions=["forget"]
    )
    def forget_memories(self, request: Any, queryset: QuerySet) -> TemplateResponse | None:
        items = list(queryset)
        history = MemoryItem.objects.using(queryset.db).filter(_history_condition(items))
        if request.POST.get("post") != "yes":
            return TemplateResponse(
                request,
                "admin/tulip_memory/memoryitem/forget_confirmation.html",
                {
                    **self.admin_site.each_context(request),
                    "title": gettext("Forget memories?"),
                    "opts": self.opts,
                    "items": [(i, content_text(i.value)) for i in items],
                    "history": [
                        (h, content_text(h.value)) for h in history.order_by("namespace", "key")
                    ],
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                    "queryset": items,
                },
            )
        self.log_deletions(request, queryset)
        gone_history = history.clear()
        gone = MemoryItem.objects.using(queryset.db).filter(pk__in=[i.pk for i in items]).clear()
        self.message_user(
            request,
            ngettext(
                "Forgot %(count)d memory and %(history)d past versions.",
                "Forgot %(count)d memories and %(history)d past versions.",
                gone,
            )
            % {"count": gone, "history": gone_history},
            messages.SUCCESS,
        )
        return None


def _history_condition(items: list[MemoryItem]) -> Q:
    condition = Q(pk__in=[])
    for item in items:
        path = history_path(item)
        if path:
            condition |= Q(tenant=item.tenant, namespace=path)
    return condition


def _when(value: Any) -> str:
    if not isinstance(value, str):
        return str(value)
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value
