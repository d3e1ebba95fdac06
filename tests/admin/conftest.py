"""Fixtures of the admin tests: users, and picking the admin tenant as a user does."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tulip_memory.models import Tenant, TenantMembership
from tulip_memory.tenancy import tenant_atomic


def pick_tenant(client, tenant: str, next_url: str = ""):
    """Choose the admin tenant with the switcher (a POST), as the tenant bar does."""
    return client.post(
        reverse("admin:tulip_memory_tenant_switch"), {"tenant": tenant, "next": next_url}
    )


def make_staff(username: str, tenants: tuple[str, ...], *codenames: str) -> User:
    """A staff user, member of ``tenants``, with the given tulip_memory permissions."""
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="tulip_memory", codename__in=codenames)
    )
    for name in tenants:
        tenant, _ = Tenant.objects.get_or_create(name=name)
        TenantMembership.objects.create(user=user, tenant=tenant)
    return user


def checkpoint_pk(model, tenant: str, checkpoint_id: str) -> int:
    """The primary key of ``tenant``'s checkpoint row ``checkpoint_id`` of ``model``."""
    with tenant_atomic(tenant):
        return model.objects.get(checkpoint_id=checkpoint_id).pk


@pytest.fixture
def superuser(db):
    return User.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def root_client(client, superuser):
    client.force_login(superuser)
    return client
