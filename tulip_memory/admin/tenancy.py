"""Admin tenancy: which tenant a page shows, the tenant switcher, the registry and memberships.

A tenant table's views run in :func:`~tulip_memory.tenancy.context.tenant_atomic` for a tenant
the user may open, picked with the switcher and kept in the session, never taken from the
request's data (docs/design/tenancy.md); :meth:`TenantScopedAdminMixin.request_tenant` chooses.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db import router
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from tulip_memory.models.admin_log import IdentifierLogMixin
from tulip_memory.models.tenants import Tenant, TenantMembership
from tulip_memory.tenancy.context import tenant_atomic

__all__ = [
    "ListQuerysetMixin",
    "ReadOnlyAdminMixin",
    "ReadOnlyTenantAdmin",
    "TenantAdmin",
    "TenantMembershipAdmin",
    "TenantScopedAdminMixin",
    "TwoViewFilter",
    "admin_tenant",
    "column",
]

# Session key of the tenant picked with the switcher.
SESSION_KEY = "tulip_memory_admin_tenant"

# Shown on a tenant table's pages when the request has no tenant (they are then empty).
NO_TENANT_MESSAGE = _(
    "No tenant is chosen, and row-level security shows one tenant at a time: pick one "
    "with the tenant switcher at the top of the page."
)
NO_MEMBERSHIP_MESSAGE = _(
    "You are not a member of any tenant: a superuser can add you in Tenant memberships."
)
# Shown when the session's tenant is no longer one the user may open.
REVOKED_MESSAGE = _(
    "You may no longer open the tenant “%(tenant)s” (your membership of it was removed): "
    "this page shows no tenant."
)


def admin_tenant(request: HttpRequest) -> tuple[str | None, list[str]]:
    """The request's admin tenant (or None) and the tenants its user may open; a session
    tenant no longer allowed is dropped with a warning. Cached on the request."""
    cached = getattr(request, "_tulip_admin_tenant", None)
    if cached is not None:
        return cached
    allowed = Tenant.objects.visible_to(getattr(request, "user", None))
    session = getattr(request, "session", None)
    chosen = session.get(SESSION_KEY) if session is not None else None
    if chosen is not None and chosen not in allowed:
        del session[SESSION_KEY]  # type: ignore[union-attr]
        messages.warning(request, REVOKED_MESSAGE % {"tenant": chosen})
        request._tulip_admin_revoked = True  # type: ignore[attr-defined]
        chosen = None
    elif chosen is None and len(allowed) == 1:
        chosen = allowed[0]
    request._tulip_admin_tenant = (chosen, allowed)  # type: ignore[attr-defined]
    return chosen, allowed


class TwoViewFilter(admin.SimpleListFilter):
    """A list filter between two views: the default one (no parameter) and ``other``;
    ``labels`` names them in that order, ``reset`` lists the query parameters a switch drops."""

    other: ClassVar[str]
    labels: ClassVar[tuple[Any, Any]]
    reset: ClassVar[tuple[str, ...]] = ()

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(self.other, self.labels[1])]

    def choices(self, changelist: Any) -> Any:
        for value, label in zip((None, self.other), self.labels, strict=True):
            chosen = {} if value is None else {self.parameter_name: value}
            dropped = [*([self.parameter_name] if value is None else []), *self.reset]
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string(chosen, remove=dropped),
                "display": label,
            }


class ReadOnlyAdminMixin:
    """No add, change or delete from the admin (viewing needs the view permission)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    has_change_permission = has_delete_permission = has_add_permission


class ListQuerysetMixin:
    """The changelist's rows from :meth:`get_list_queryset` (a wide column the list never
    shows left out); the detail page reads everything."""

    def get_list_queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        """``queryset`` (filtered, searched and ordered) as the list reads it."""
        return queryset

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return _ListQuerysetChangeList


class _ListQuerysetChangeList(ChangeList):
    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        queryset = super().get_queryset(request, exclude_parameters)
        return cast("ListQuerysetMixin", self.model_admin).get_list_queryset(request, queryset)


class TenantScopedAdminMixin(IdentifierLogMixin):
    """Run the changelist and detail views in a transaction pinned to the admin tenant;
    log the rows it changes by their ids (a tenant table's rows hold content)."""

    model: Any

    def request_tenant(self, request: HttpRequest) -> str | None:
        """The tenant this request shows (see the module docstring), or None."""
        return admin_tenant(request)[0]

    def _in_tenant(
        self, request: HttpRequest, view: Any, *args: Any, **kwargs: Any
    ) -> HttpResponse:
        tenant = self.request_tenant(request)
        if tenant is None:
            # A revoked tenant's warning already says why the page is empty.
            if not getattr(request, "_tulip_admin_revoked", False):
                allowed = admin_tenant(request)[1]
                messages.warning(request, NO_TENANT_MESSAGE if allowed else NO_MEMBERSHIP_MESSAGE)
            return view(request, *args, **kwargs)
        with tenant_atomic(tenant, using=router.db_for_read(self.model)):
            response = view(request, *args, **kwargs)
            if hasattr(response, "render"):
                response.render()
            return response

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._in_tenant(request, super().changelist_view, *args, **kwargs)  # type: ignore[misc]

    def change_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._in_tenant(request, super().change_view, *args, **kwargs)  # type: ignore[misc]

    def history_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return self._in_tenant(request, super().history_view, *args, **kwargs)  # type: ignore[misc]


class ReadOnlyTenantAdmin(ReadOnlyAdminMixin, TenantScopedAdminMixin, admin.ModelAdmin):
    """The base of this app's pages of a tenant table: read-only, one tenant at a time."""


def column(name: str, description: Any, *, sortable: bool = True) -> Any:
    """A list or page column showing the row's attribute ``name`` (a field, a property or an
    annotation) under ``description``; ``sortable``: ordered by ``name``."""

    @admin.display(description=description, ordering=name if sortable else None)
    def show(model_admin: Any, obj: Any) -> Any:
        return getattr(obj, name)

    return show


class SuperuserOnlyAdminMixin:
    """Only superusers see and edit these tables."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    has_add_permission = has_change_permission = has_delete_permission = has_view_permission


@admin.register(Tenant)
class TenantAdmin(SuperuserOnlyAdminMixin, admin.ModelAdmin):
    """The tenant registry (superusers), and the switcher's URL (every staff user)."""

    list_display = ("name", "registered_at", "member_count")
    search_fields = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Counted with the tenants, not one query per row.
        return super().get_queryset(request).annotate(members=Count("memberships"))

    @admin.display(description=_("members"), ordering="members")
    def member_count(self, tenant: Tenant) -> int:
        return tenant.members  # type: ignore[attr-defined]

    def get_urls(self) -> list[Any]:
        switch = self.admin_site.admin_view(require_POST(self.switch_view))
        return [path("switch/", switch, name="tulip_memory_tenant_switch"), *super().get_urls()]

    def switch_view(self, request: HttpRequest) -> HttpResponse:
        """Keep the posted tenant in the session, if the user may open it."""
        name = request.POST.get("tenant", "")
        if name not in admin_tenant(request)[1]:
            raise PermissionDenied(gettext("You may not open this tenant."))
        request.session[SESSION_KEY] = name
        target = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            target = reverse("admin:app_list", args=["tulip_memory"])
        # A detail page belongs to the previous tenant: go back to its list instead.
        return HttpResponseRedirect(_list_of(target))


def _list_of(url: str) -> str:
    parts = url.split("?", maxsplit=1)[0].rstrip("/").split("/")
    for index, part in enumerate(parts):
        if part == "tulip_memory" and len(parts) > index + 2:
            return "/".join(parts[: index + 2]) + "/"
    return url


@admin.register(TenantMembership)
class TenantMembershipAdmin(SuperuserOnlyAdminMixin, admin.ModelAdmin):
    """Which staff user may open which tenant in the admin (edited by superusers)."""

    list_display = ("user", "tenant")
    list_filter = ("tenant",)
    search_fields = ("user__username", "tenant__name")
    autocomplete_fields = ("tenant",)
