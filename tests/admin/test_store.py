"""The read-only admin of PgMemory's items, through Django's test client, under RLS."""

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

CHANGELIST = "admin:tulip_memory_memoryitem_changelist"


@pytest.fixture
def memories(db):
    store = PgMemory()
    async_to_sync(store.put)(("alpha", "users", "u1"), "drink", {"text": "alpha likes green tea"})
    async_to_sync(store.put)(("alpha", "users", "u1"), "odd", {"text": "ünïcode ✓ 東京"})
    async_to_sync(store.put)(("beta", "users", "u9"), "car", {"text": "beta drives a red car"})


@pytest.fixture
def superuser_client(client, db):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_changelist_shows_only_the_chosen_tenant(memories, superuser_client):
    page = superuser_client.get(reverse(CHANGELIST), {"tenant": "alpha"})
    assert page.status_code == 200
    content = page.content.decode()
    assert "alpha likes green tea" in content and "beta drives" not in content
    assert "1 memory" not in content and "2 memories" in content
    page = superuser_client.get(reverse(CHANGELIST), {"tenant": "beta", "o": "2"})
    assert "beta drives a red car" in page.content.decode()


def test_without_a_tenant_nothing_is_visible_and_the_page_says_why(memories, superuser_client):
    page = superuser_client.get(reverse(CHANGELIST))
    content = page.content.decode()
    assert page.status_code == 200
    assert "0 memories" in content and "?tenant=" in content


def test_detail_page_keeps_the_tenant_from_the_changelist_filters(memories, superuser_client):
    with tenant_atomic("alpha"):
        item = MemoryItem.objects.get(key="odd")
    url = reverse("admin:tulip_memory_memoryitem_change", args=[item.pk])
    page = superuser_client.get(url, {"_changelist_filters": "tenant=alpha"})
    assert page.status_code == 200
    assert "ünïcode ✓ 東京" in page.content.decode()
    assert superuser_client.get(url).status_code == 302  # no tenant: not found, back to list
    assert superuser_client.get(url, {"_changelist_filters": "tenant=beta"}).status_code == 302


def test_the_admin_is_read_only(memories, superuser_client):
    assert superuser_client.get(reverse("admin:tulip_memory_memoryitem_add")).status_code == 403
    with tenant_atomic("alpha"):
        item = MemoryItem.objects.get(key="drink")
    url = reverse("admin:tulip_memory_memoryitem_delete", args=[item.pk])
    assert superuser_client.post(url, {"post": "yes", "tenant": "alpha"}).status_code == 403


def test_staff_cannot_pick_a_tenant_but_the_middleware_tenant_applies(memories, client, settings):
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(Permission.objects.get(codename="view_memoryitem"))
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tulip_memory.middleware.TenantMiddleware"]
    client.force_login(staff)
    page = client.get(reverse(CHANGELIST), {"tenant": "beta"})
    assert "beta drives" not in page.content.decode()
    page = client.get(reverse(CHANGELIST), HTTP_X_TENANT="beta")
    assert "beta drives a red car" in page.content.decode()
