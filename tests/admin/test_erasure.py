"""The erasure receipts' admin: tenant-scoped, read-only, counts without content."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.admin.conftest import make_staff, pick_tenant
from tulip_memory.erasure import forget_subject
from tulip_memory.models import ErasureReceipt
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "admin:tulip_memory_erasurereceipt_changelist"


@pytest.fixture
def receipts():
    acme = forget_subject("acme", "alice", actor="dpo-acme").receipt
    globex = forget_subject("globex", "alice", actor="dpo-globex").receipt
    return acme, globex


def test_a_superuser_sees_the_picked_tenants_receipts_only(client, superuser, receipts):
    acme, globex = receipts
    client.force_login(superuser)
    pick_tenant(client, "acme")
    page = client.get(reverse(LIST)).content.decode()
    assert "dpo-acme" in page and acme.subject_ref[:16] in page
    assert "dpo-globex" not in page and globex.subject_ref[:16] not in page
    assert "Add erasure receipt" not in page
    detail = client.get(reverse("admin:tulip_memory_erasurereceipt_change", args=[acme.pk]))
    text = detail.content.decode()
    assert "<th>memories</th><td>0</td>" in text and "<th>delta_blocks</th><td>0</td>" in text
    assert acme.subject_ref in text and 'name="_save"' not in text and "alice" not in text
    # globex's receipt by a typed URL, acme picked: row-level security hides it.
    other = client.get(reverse("admin:tulip_memory_erasurereceipt_change", args=[globex.pk]))
    assert other.status_code == 302


def test_a_staff_member_sees_only_the_receipts_of_its_tenant(client, receipts):
    _acme, globex = receipts
    staff = make_staff("ann", ("globex",), "view_erasurereceipt")
    client.force_login(staff)
    page = client.get(reverse(LIST), HTTP_X_TENANT="acme").content.decode()
    assert "dpo-globex" in page and "dpo-acme" not in page
    assert client.post(
        reverse(LIST), {"action": "delete_selected", "_selected_action": [globex.pk]}
    )
    with tenant_atomic("globex"):
        assert ErasureReceipt.objects.filter(pk=globex.pk).exists()
