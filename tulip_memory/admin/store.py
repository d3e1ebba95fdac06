"""Admin of PgMemory's live memories, one tenant at a time (expired ones behind a filter,
past versions on their memory's page); the search box ranks as the store does; **Forget**
(``forget_memoryitem``) is the one write, confirmed and logged.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import display_for_value
from django.contrib.admin.views.main import ORDER_VAR
from django.db.models import Case, FloatField, QuerySet, Value, When
from django.db.models.functions import Cast
from django.http import QueryDict
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tulip_memory.admin.tenancy import ReadOnlyTenantAdmin, TwoViewFilter, column
from tulip_memory.core.clock import utc_now
from tulip_memory.core.namespaces import NAMESPACE_SEPARATOR, decode_namespace, encode_namespace
from tulip_memory.manager.history import CONTENT_SINCE, HISTORY_LABEL
from tulip_memory.manager.types import MemoryType
from tulip_memory.models.store import MemoryItem, namespace_prefix_condition

__all__ = ["MemoryItemAdmin"]

# Hits the search box shows (it ranks as PgMemory.search does).
SEARCH_LIMIT = 50
# Memories (and past versions) the forget confirmation lists; it counts them all.
FORGET_SHOWN = 100
# Memories per DELETE statement of Forget.
FORGET_CHUNK = 1000
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


def history_path(namespace: str, key: str) -> str | None:
    """The namespace path of the past versions of the memory at ``namespace`` and ``key``
    (None for a one-label namespace)."""
    labels = decode_namespace(namespace)
    if len(labels) < 2:
        return None
    return encode_namespace((*labels[:-1], HISTORY_LABEL, labels[-1], key))


def _pretty(value: Any) -> str:
    return format_html(
        '<pre class="tulip-pre">{}</pre>', json.dumps(value, ensure_ascii=False, indent=2)
    )


class ExpiryFilter(TwoViewFilter):
    """Live memories (the default), or the expired ones the sweep has yet to delete; applied
    in :meth:`MemoryItemAdmin.get_queryset` so that every view reads the same memories."""

    title = _("expiry")
    parameter_name = "expired"
    other = EXPIRED = "yes"
    labels = (_("live"), _("expired, due for the sweep"))

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        return queryset


class NamespacePrefixFilter(admin.SimpleListFilter):
    """Memories under a namespace prefix (every prefix of the tenant's namespaces)."""

    title = _("namespace prefix")
    parameter_name = "namespace_prefix"
    max_choices = 100

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        # Neither the list's ordering nor the score: DISTINCT would keep one row per memory.
        paths = (
            model_admin.shown_memories(request)
            .order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        )
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


class EmbeddingSourceFilter(admin.SimpleListFilter):
    """What computed the memory's vector; choices from the store's own sources and a bounded
    sample of rows (no pass over the tenant), any source accepted in the URL."""

    title = _("embedding source")
    parameter_name = "embedding_source"
    sample_rows = 1000
    NONE = "-"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        from tulip_memory.embeddings.loading import HRR
        from tulip_memory.store.pg.encoder import EXTERNAL_SOURCE

        sample = (
            model_admin.shown_memories(request)
            .order_by()
            .values_list("embedding_source", flat=True)[: self.sample_rows]
        )
        sources = {HRR, EXTERNAL_SOURCE, *sample}
        if self.value() and self.value() != self.NONE:
            sources.add(self.value())
        sources.discard("")
        return [(s, s) for s in sorted(sources)] + [(self.NONE, gettext("none"))]

    def queryset(self, request: Any, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(embedding_source="" if value == self.NONE else value)


@admin.register(MemoryItem)
class MemoryItemAdmin(ReadOnlyTenantAdmin):
    # The embedding source is a filter and on the page: the list keeps room for the content.
    list_display = ("namespace", "key", "content", "version", "updated_at")
    list_display_links = ("key",)
    list_filter = (ExpiryFilter, NamespacePrefixFilter, MemoryTypeFilter, EmbeddingSourceFilter)
    search_fields = ("key",)  # the box itself is answered by the store's search
    search_help_text = _("Ranked like the agent's recall (the store's own search).")
    ordering = ("namespace", "-updated_at", "key")
    list_per_page = 50
    # "N of M": a second count over the whole tenant on every page; the filtered count stays.
    show_full_result_count = False
    # Facets would count every choice over the tenant on every page.
    show_facets = admin.ShowFacets.NEVER
    actions = ["forget_memories"]
    fields = readonly_fields = (
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
        "expiry",
    )
    change_form_template = "admin/tulip_memory/memoryitem/change_form.html"

    def shows_expired(self, request: Any) -> bool:
        """Whether ``request`` asks for the expired memories, on the list or kept from it."""
        query = request.GET
        if ExpiryFilter.parameter_name not in query and "_changelist_filters" in query:
            query = QueryDict(query["_changelist_filters"])
        return query.get(ExpiryFilter.parameter_name) == ExpiryFilter.EXPIRED

    def shown_memories(self, request: Any) -> QuerySet:
        """The memories ``request`` shows, unordered, without past versions or vectors."""
        rows = self.model._default_manager.get_queryset()
        rows = rows.expired(utc_now()) if self.shows_expired(request) else rows.live(utc_now())
        return rows.exclude(namespace__contains=_HISTORY_MARK).defer("embedding")

    def get_queryset(self, request: Any) -> Any:
        return self.shown_memories(request).order_by(*self.get_ordering(request))

    def get_search_results(
        self, request: Any, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        tenant = self.request_tenant(request)
        if not term or tenant is None or queryset.query.is_empty():
            return queryset, False
        cache = request.__dict__.setdefault("_tulip_scores", {})
        key = (term, str(queryset.order_by().query))
        if key not in cache:
            # The expired memories are ranked only when they are the ones shown.
            now = None if self.shows_expired(request) else utc_now()
            cache[key] = self._ranked(tenant, queryset.order_by(), term, now)
        scores = cache[key]
        score: Case | Cast
        if scores:
            score = Case(
                *(When(pk=pk, then=Value(s)) for pk, s in scores.items()),
                default=Value(0.0),
                output_field=FloatField(),
            )
        else:
            # No hit: a Case without a When is its default alone, and PostgreSQL refuses
            # ORDER BY a bare constant (a cast one is an expression).
            score = Cast(Value(0.0), FloatField())
        # Highest score first: the list's ordering was set before the search (ChangeList).
        hits = queryset.filter(pk__in=list(scores)).annotate(search_score=score)
        return hits.order_by("-search_score", "key", "pk"), False

    def _ranked(
        self, tenant: str, queryset: QuerySet, query: str, now: datetime | None
    ) -> dict[int, float]:
        """pk → score of the top hits among ``queryset`` as PgMemory.search ranks them (the
        fused score, or the cosine without words), rows expired at ``now`` left out. Asks for
        more while a non-namespace filter leaves ranked rows out."""
        from tulip_memory.store.pg.search import search_paths
        from tulip_memory.store.pg.store import PgMemory

        store = PgMemory(queryset.db)
        paths = list(queryset.order_by("namespace").values_list("namespace", flat=True).distinct())
        if not paths:
            return {}
        ranking = async_to_sync(store.ranking_arguments)(tenant, query)
        fused = ranking.get("terms") is not None
        limit = SEARCH_LIMIT
        while True:
            rows = search_paths(
                MemoryItem.objects.using(queryset.db), tenant, paths, limit, now=now, **ranking
            )
            rows.sort(key=lambda row: row.rank)
            found = queryset.filter(
                tenant=tenant,
                namespace__in={paths[row.position] for row in rows},
                key__in={row.key for row in rows},
            ).values_list("pk", "namespace", "key")
            pk_of = {(namespace, key): pk for pk, namespace, key in found}
            hits = [row for row in rows if (paths[row.position], row.key) in pk_of]
            # A namespace that gave ``limit`` rows may hold more, each ranked below its
            # last: enough when that last one ranks below the SEARCH_LIMIT-th hit.
            counts = Counter(row.position for row in rows)
            last = {row.position: row.rank for row in rows}  # rows are best first
            cut = [last[position] for position, count in counts.items() if count >= limit]
            if not cut or (len(hits) >= SEARCH_LIMIT and min(cut) >= hits[SEARCH_LIMIT - 1].rank):
                break
            limit *= 4
        return {
            pk_of[paths[row.position], row.key]: round(-row.rank if fused else 1.0 - row.rank, 4)
            for row in hits[:SEARCH_LIMIT]
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
        shown: tuple[str, ...] = self.list_display
        if self.shows_expired(request):
            # When it expired says more than when it was written, in the same room.
            shown = tuple("expired_at" if name == "updated_at" else name for name in shown)
        if request.GET.get("q", "").strip():
            return ("score", *shown)
        return shown

    @admin.display(description=_("score"))
    def score(self, item: MemoryItem) -> str:
        return f"{getattr(item, 'search_score', 0.0):.3f}"

    @admin.display(description=_("content"))
    def content(self, item: MemoryItem) -> str:
        text = content_text(item.value)
        return text if len(text) <= LIST_CONTENT_CHARS else text[: LIST_CONTENT_CHARS - 1] + "…"

    @admin.display(description=_("expiry"), ordering="expires_at")
    def expiry(self, item: MemoryItem) -> str:
        if item.expires_at is None:
            return gettext("never")
        when = display_for_value(item.expires_at, "")
        if item.expires_at <= utc_now():
            return gettext("expired at %(when)s, due for the sweep") % {"when": when}
        return when

    # The list of expired memories: the filter's choice already says they are.
    expired_at = column("expires_at", _("expired at"))

    @admin.display(description=_("value"))
    def pretty_value(self, item: MemoryItem) -> str:
        return _pretty(item.value)

    @admin.display(description=_("metadata"))
    def pretty_metadata(self, item: MemoryItem) -> str:
        return _pretty(item.metadata)

    @admin.display(description=_("versions (oldest first)"))
    def versions(self, item: MemoryItem) -> str:
        entries = []
        for row in self._history(item).order_by("key"):
            fields = row.value if isinstance(row.value, dict) else {}
            span = (fields.get("valid_from", "?"), fields.get("valid_to", "?"))
            entries.append((row.value, *span, fields.get("version", row.key), ""))
        since = item.value.get(CONTENT_SINCE) if isinstance(item.value, dict) else None
        current = (since or item.updated_at.isoformat(), gettext("now"))
        entries.append((item.value, *current, item.version, "current"))
        return format_html(
            '<ol class="tulip-timeline" id="tulip-versions">{}</ol>',
            format_html_join(
                "",
                '<li class="{4}"><span class="tulip-meta">v{3} · {1} → {2}</span><br>{0}</li>',
                ((content_text(v), _when(f), _when(t), n, cls) for v, f, t, n, cls in entries),
            ),
        )

    def _history(self, item: MemoryItem) -> QuerySet:
        path = history_path(item.namespace, item.key)
        rows = MemoryItem.objects.using(item._state.db).live(utc_now())
        return rows.filter(tenant=item.tenant, namespace=path) if path else rows.none()

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
        """Confirm, then delete the memories and their past versions by primary key in chunks,
        logging each memory's deletion."""
        selected = list(queryset.order_by().values_list("pk", "namespace", "key"))
        pks = [pk for pk, _namespace, _key in selected]
        now = utc_now()
        history, live_history = _history_pks(
            queryset.db, [(namespace, key) for _pk, namespace, key in selected], now
        )
        rows = MemoryItem.objects.using(queryset.db)
        select_across = request.POST.get("select_across") == "1"
        # Select-across posts the list's filters, not the memories: what they select now
        # must be what was confirmed.
        changed = select_across and request.POST.get("tulip_forget_count") != str(len(selected))
        if request.POST.get("post") != "yes" or changed:
            if request.POST.get("post") == "yes":
                self.message_user(
                    request,
                    gettext("The selection changed since it was confirmed: confirm again."),
                    messages.WARNING,
                )
            shown = rows.filter(pk__in=live_history[:FORGET_SHOWN]).order_by("namespace", "key")
            return TemplateResponse(
                request,
                "admin/tulip_memory/memoryitem/forget_confirmation.html",
                {
                    **self.admin_site.each_context(request),
                    "title": gettext("Forget memories?"),
                    "opts": self.opts,
                    "count": len(selected),
                    "items": [(i, content_text(i.value)) for i in queryset[:FORGET_SHOWN]],
                    "history_count": len(live_history),
                    "history": [(h, content_text(h.value)) for h in shown],
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                    # Select-across posts the list's filters again (the form keeps the
                    # URL's query) and one memory, as the list does; else the memories.
                    "select_across": select_across,
                    "selected_pks": pks[: 1 if select_across else None],
                },
            )
        gone_history = sum(rows.filter(pk__in=chunk).clear_live(now) for chunk in _chunks(history))
        gone = 0
        for chunk in _chunks(pks):
            memories = rows.filter(pk__in=chunk)
            self.log_deletions(request, memories)
            gone += memories.clear()
        memories_text = ngettext("%(count)d memory", "%(count)d memories", gone) % {"count": gone}
        history_text = ngettext(
            "%(count)d past version", "%(count)d past versions", gone_history
        ) % {"count": gone_history}
        self.message_user(
            request,
            gettext("Forgot %(memories)s and %(history)s.")
            % {"memories": memories_text, "history": history_text},
            messages.SUCCESS,
        )
        return None


def _history_pks(
    using: str, memories: list[tuple[str, str]], now: datetime
) -> tuple[list[int], list[int]]:
    paths = {path for namespace, key in memories if (path := history_path(namespace, key))}
    if not paths:
        return [], []
    prefixes = {decode_namespace(path)[:-1] for path in paths}
    found = sorted(
        (pk, expires_at is None or expires_at > now)
        for pk, namespace, expires_at in MemoryItem.objects.using(using)
        .filter(namespace_prefix_condition(sorted(prefixes)))
        .values_list("pk", "namespace", "expires_at")
        if namespace in paths
    )
    return [pk for pk, _live in found], [pk for pk, live in found if live]


def _chunks(pks: list[int]) -> list[list[int]]:
    return [pks[start : start + FORGET_CHUNK] for start in range(0, len(pks), FORGET_CHUNK)]


def _when(value: Any) -> str:
    if not isinstance(value, str):
        return str(value)
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value
