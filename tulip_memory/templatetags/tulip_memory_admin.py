"""``{% tulip_tenant_bar %}``: "Tenant: acme · change" atop every tulip_memory admin page."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from tulip_memory.admin.tenancy import admin_tenant

register = template.Library()


@register.inclusion_tag("admin/tulip_memory/tenant_bar.html", takes_context=True)
def tulip_tenant_bar(context: Any) -> dict[str, Any]:
    request = context.get("request")
    if request is None or not getattr(request, "user", None):
        return {"show": False}
    tenant, tenants = admin_tenant(request)
    return {
        "show": True,
        "tenant": tenant,
        "tenants": tenants,
        "switch_url": reverse("admin:tulip_memory_tenant_switch"),
        "next": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }
