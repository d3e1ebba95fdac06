"""Who may see which tenant: the tenant registry and the admin's memberships.

Neither table holds tenant data, so neither is under row-level security. :class:`Tenant`
is filled by database triggers on every tenant table (:mod:`tulip_memory.postgres.
tenant_registry`); elsewhere :meth:`TenantQuerySet.names` also reads the tenant columns.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections, models
from django.utils.translation import gettext_lazy as _

from tulip_memory.tenancy.context import TENANT_MAX_LENGTH

__all__ = ["Tenant", "TenantMembership"]


class TenantQuerySet(models.QuerySet):
    def names(self) -> list[str]:
        """Every known tenant name, sorted."""
        names = set(self.values_list("name", flat=True))
        if connections[self.db].vendor != "postgresql":
            from django.apps import apps

            from tulip_memory.postgres.rls import TENANT_COLUMN

            # Only the tables this database has (the LangGraph tables are PostgreSQL's).
            present = set(connections[self.db].introspection.table_names())
            for model in apps.get_app_config("tulip_memory").get_models():
                if model._meta.db_table in present and any(
                    f.column == TENANT_COLUMN for f in model._meta.concrete_fields
                ):
                    names.update(
                        model._default_manager.using(self.db)
                        .values_list(TENANT_COLUMN, flat=True)
                        .distinct()
                    )
        return sorted(names)

    def visible_to(self, user: Any) -> list[str]:
        """The tenants ``user`` may open in the admin: all for a superuser, else its own."""
        if not getattr(user, "is_active", False) or not getattr(user, "is_staff", False):
            return []
        if user.is_superuser:
            return self.names()
        return sorted(
            TenantMembership.objects.using(self.db)
            .filter(user=user)
            .values_list("tenant_id", flat=True)
        )


class Tenant(models.Model):
    """A tenant's name, registered when a row of it is first written."""

    name = models.CharField(_("name"), max_length=TENANT_MAX_LENGTH, primary_key=True)
    registered_at = models.DateTimeField(_("registered at"), auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        db_table = "tulip_memory_tenant"
        verbose_name = _("tenant")
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class TenantMembership(models.Model):
    """``user`` belongs to ``tenant``: their requests are bound to it by ``TenantMiddleware``
    (docs/pg_store.md, "Tenancy"), and a staff user may open it in the admin."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tulip_tenants"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")

    class Meta:
        db_table = "tulip_memory_tenant_membership"
        verbose_name = _("tenant membership")
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="tulip_membership_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.tenant_id}"
