"""The read-only checkpoint admin, through the test client, as the app role under RLS."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from tulip_memory.backends import PostgreSQLCheckpointer
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.messages import Message, Role
from tulip_memory.models import DeltaCheckpointRecord
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("tenant_middleware"),
]


@pytest.fixture
def tenant_middleware():
    with override_settings(
        MIDDLEWARE=[*settings.MIDDLEWARE, "tulip_memory.middleware.TenantMiddleware"]
    ):
        yield


@async_to_sync
async def _save_chain(tenant: str, thread_id: str, saves: int) -> list[str]:
    checkpointer = DeltaCheckpointer(ORMDeltaStorage("default", tenant=tenant), max_chain_depth=2)
    state = AgentState()
    ids = []
    for n in range(saves):
        state.messages.append(Message(Role.USER, f"message {n}"))
        ids.append(await checkpointer.save(state, thread_id))
    await PostgreSQLCheckpointer("default", tenant=tenant).save(state, thread_id, "snapshot-1")
    return ids


def test_changelist_shows_the_tenants_chains(admin_client):
    ids = _save_chain("acme", "chat-1", 4)
    other = _save_chain("globex", "chat-2", 1)
    url = reverse("admin:tulip_memory_deltacheckpointrecord_changelist")
    page = admin_client.get(url, HTTP_X_TENANT="acme").content.decode()
    for checkpoint_id in ids:
        assert checkpoint_id in page
    assert other[0] not in page
    assert page.count(">full<") == 2 and page.count(">delta<") == 2  # depth 2: F D D F
    assert f"checkpoint_id={ids[0]}" in page  # the parent link of ids[1]
    assert "Add delta checkpoint" not in page

    hidden = admin_client.get(url).content.decode()
    assert ids[0] not in hidden and "No tenant is bound" in hidden

    snapshots = admin_client.get(
        reverse("admin:tulip_memory_checkpointrecord_changelist"), HTTP_X_TENANT="acme"
    ).content.decode()
    assert "snapshot-1" in snapshots
    blocks = admin_client.get(
        reverse("admin:tulip_memory_deltablock_changelist"), HTTP_X_TENANT="acme"
    ).content.decode()
    assert "chat-1" in blocks and "chat-2" not in blocks


def test_detail_shows_the_chain_and_is_read_only(admin_client):
    ids = _save_chain("acme", "chat-1", 3)
    with tenant_atomic("acme"):
        pk = DeltaCheckpointRecord.objects.get(checkpoint_id=ids[2]).pk
    url = reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk])
    page = admin_client.get(url, HTTP_X_TENANT="acme").content.decode()
    chain = page[page.index("<ol><li>") : page.index("</ol>", page.index("<ol><li>"))]
    assert chain.index(f"{ids[0]} — full, depth 0") < chain.index(f"{ids[1]} — delta, depth 1")
    assert chain.index(f"{ids[1]} — delta") < chain.index(f"{ids[2]} — delta, depth 2")
    assert 'name="_save"' not in page
    assert admin_client.post(url, {}, HTTP_X_TENANT="acme").status_code == 403
    delete = reverse("admin:tulip_memory_deltacheckpointrecord_delete", args=[pk])
    assert admin_client.post(delete, {"post": "yes"}, HTTP_X_TENANT="acme").status_code == 403
    # Another tenant cannot even open it.
    assert admin_client.get(url, HTTP_X_TENANT="globex").status_code == 302


def test_a_superuser_picks_the_tenant_in_the_address(admin_client):
    ids = _save_chain("acme", "chat-1", 1)
    url = reverse("admin:tulip_memory_deltacheckpointrecord_changelist")
    assert ids[0] in admin_client.get(url, {"tenant": "acme"}).content.decode()
    assert ids[0] not in admin_client.get(url, {"tenant": "globex"}).content.decode()
    with tenant_atomic("acme"):
        pk = DeltaCheckpointRecord.objects.get(checkpoint_id=ids[0]).pk
    detail = reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk])
    page = admin_client.get(detail, {"_changelist_filters": "tenant=acme"})
    assert page.status_code == 200 and ids[0] in page.content.decode()
