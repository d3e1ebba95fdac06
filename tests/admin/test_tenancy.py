"""Who sees which tenant in the admin: the registry, memberships and the switcher."""

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.messages import get_messages
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.admin.conftest import make_staff, pick_tenant
from tulip_memory.admin.tenancy import REVOKED_MESSAGE, SESSION_KEY, _list_of
from tulip_memory.models import Tenant, TenantMembership
from tulip_memory.store import PgMemory

CHANGELIST = "admin:tulip_memory_memoryitem_changelist"


@async_to_sync
async def _put(tenant: str, text: str) -> None:
    await PgMemory().put((tenant, "u", "user"), "k", {"content": text})


@pytest.fixture
def two_tenants(db):
    _put("acme", "acme secret")
    _put("globex", "globex secret")


def test_a_first_write_registers_the_tenant(two_tenants):
    assert Tenant.objects.names() == ["acme", "globex"]
    _put("acme", "again")  # an existing tenant is not registered twice
    assert Tenant.objects.filter(name="acme").count() == 1


def test_superusers_see_every_tenant_staff_their_memberships(two_tenants, superuser):
    staff = make_staff("a", ("acme",))
    outsider = make_staff("o", ())
    assert Tenant.objects.visible_to(superuser) == ["acme", "globex"]
    assert Tenant.objects.visible_to(staff) == ["acme"]
    assert Tenant.objects.visible_to(outsider) == []
    staff.is_staff = False
    assert Tenant.objects.visible_to(staff) == []


@override_settings(MIDDLEWARE=[*settings.MIDDLEWARE, "tulip_memory.middleware.TenantMiddleware"])
def test_staff_of_one_tenant_never_picks_and_cannot_reach_another(two_tenants, client):
    client.force_login(make_staff("a", ("acme",), "view_memoryitem"))
    url = reverse(CHANGELIST)
    page = client.get(url).content.decode()
    assert "acme secret" in page and "globex" not in page
    assert pick_tenant(client, "globex").status_code == 403
    assert client.session.get(SESSION_KEY) is None
    for attempt in (
        client.get(url, {"tenant": "globex"}),
        client.get(url, HTTP_X_TENANT="globex"),
        client.get(url, {"_changelist_filters": "tenant=globex"}, follow=True),
    ):
        content = attempt.content.decode()
        assert attempt.status_code == 200 and "globex secret" not in content


def test_the_switch_is_kept_in_the_session_and_re_checked(two_tenants, client, superuser):
    client.force_login(superuser)
    response = pick_tenant(client, "globex", "/admin/tulip_memory/memoryitem/7/change/")
    assert response.status_code == 302 and response["Location"] == "/admin/tulip_memory/memoryitem/"
    assert "globex secret" in client.get(reverse(CHANGELIST)).content.decode()
    assert pick_tenant(client, "nobody").status_code == 403
    assert pick_tenant(client, "acme", "https://evil.example/").status_code == 302
    assert client.session[SESSION_KEY] == "acme"
    assert client.get(reverse("admin:tulip_memory_tenant_switch")).status_code == 405


def test_memberships_and_registry_are_for_superusers_only(two_tenants, client, superuser):
    client.force_login(make_staff("a", ("acme",), "view_memoryitem"))
    assert client.get(reverse("admin:tulip_memory_tenantmembership_changelist")).status_code == 403
    assert client.get(reverse("admin:tulip_memory_tenant_changelist")).status_code == 403
    client.force_login(superuser)
    page = client.get(reverse("admin:tulip_memory_tenantmembership_changelist"))
    assert page.status_code == 200 and "acme" in page.content.decode()


def test_a_user_without_membership_is_told_so(two_tenants, client):
    client.force_login(make_staff("o", (), "view_memoryitem"))
    page = client.get(reverse(CHANGELIST)).content.decode()
    assert "not a member of any tenant" in page and "secret" not in page


def test_list_of_maps_a_detail_page_to_its_list():
    assert _list_of("/admin/tulip_memory/memoryitem/3/change/") == "/admin/tulip_memory/memoryitem/"
    assert _list_of("/admin/tulip_memory/memoryitem/?q=x") == "/admin/tulip_memory/memoryitem/?q=x"
    assert _list_of("/admin/") == "/admin/"


def test_the_tenant_list_counts_members_with_the_tenants(two_tenants, client, superuser):
    """No query per tenant: the member counts come with the list."""
    client.force_login(superuser)
    make_staff("a1", ("acme",))
    make_staff("a2", ("acme", "globex"))
    url = reverse("admin:tulip_memory_tenant_changelist")
    with CaptureQueriesContext(connection) as two:
        page = client.get(url).content.decode()
    assert '<td class="field-member_count">2</td>' in page
    assert '<td class="field-member_count">1</td>' in page
    for n in range(4):
        Tenant.objects.create(name=f"more-{n}")
    with CaptureQueriesContext(connection) as six:
        page = client.get(url).content.decode()
    assert page.count('<td class="field-member_count">0</td>') == 4
    assert len(six.captured_queries) == len(two.captured_queries)


def test_a_revoked_membership_loses_its_tenant_at_the_next_request(two_tenants, client):
    """acme and globex, globex picked, then its membership deleted: the next list shows
    neither tenant's memories, says why, and the session forgets globex."""
    staff = make_staff("ag", ("acme", "globex"), "view_memoryitem")
    client.force_login(staff)
    pick_tenant(client, "globex")
    assert "globex secret" in client.get(reverse(CHANGELIST)).content.decode()
    TenantMembership.objects.filter(user=staff, tenant_id="globex").delete()
    response = client.get(reverse(CHANGELIST))
    page = response.content.decode()
    # Neither globex nor, in its place, acme: the page was asked for globex.
    assert "globex secret" not in page and "acme secret" not in page
    assert "0 memories" in page and "no longer open the tenant" in page
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        REVOKED_MESSAGE % {"tenant": "globex"}
    ]
    assert SESSION_KEY not in client.session
    # Back to what a member of acme alone gets: acme, without picking.
    assert "acme secret" in client.get(reverse(CHANGELIST)).content.decode()
