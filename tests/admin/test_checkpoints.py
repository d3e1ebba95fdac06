"""The read-only checkpoint admin, through the test client, as the app role under RLS."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from tests.admin.conftest import checkpoint_pk, pick_tenant
from tulip_memory.backends import PostgreSQLCheckpointer
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.models import CheckpointRecord, DeltaCheckpointRecord
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)


@async_to_sync
async def _save_chain(tenant: str, thread_id: str, saves: int) -> list[str]:
    checkpointer = DeltaCheckpointer(ORMDeltaStorage("default", tenant=tenant), max_chain_depth=2)
    state = AgentState()
    ids = []
    for n in range(saves):
        state.messages.append(Message(Role.USER, f"message {n}"))
        if n == 1:
            call = ToolCall("call-1", "lookup", {"q": "tea"})
            state.messages.append(Message(Role.ASSISTANT, "", tool_calls=[call]))
            state.messages.append(Message(Role.TOOL, "green tea", tool_call_id="call-1"))
        ids.append(await checkpointer.save(state, thread_id))
    plain = PostgreSQLCheckpointer("default", tenant=tenant)
    await plain.save(AgentState(messages=state.messages[:1]), thread_id, "snapshot-1")
    await plain.save(state, thread_id, "snapshot-2")
    return ids


def test_changelist_links_parents_by_primary_key(root_client):
    ids = _save_chain("acme", "chat-1", 4)
    other = _save_chain("globex", "chat-2", 1)
    pick_tenant(root_client, "acme")
    url = reverse("admin:tulip_memory_deltacheckpointrecord_changelist")
    page = root_client.get(url).content.decode()
    for checkpoint_id in ids:
        assert checkpoint_id in page
    assert other[0] not in page
    assert page.count(">full<") == 2 and page.count(">delta<") == 2  # depth 2: F D D F
    parent = reverse(
        "admin:tulip_memory_deltacheckpointrecord_change",
        args=[checkpoint_pk(DeltaCheckpointRecord, "acme", ids[0])],
    )
    assert f'href="{parent}"' in page
    assert "Add delta checkpoint" not in page


def test_delta_detail_shows_the_conversation_timeline_and_storage(root_client):
    ids = _save_chain("acme", "chat-1", 3)
    pick_tenant(root_client, "acme")
    pk = checkpoint_pk(DeltaCheckpointRecord, "acme", ids[2])
    url = reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk])
    page = root_client.get(url).content.decode()
    chat = page[page.index('id="tulip-conversation"') :]
    assert chat.index("message 0") < chat.index("lookup") < chat.index("green tea")
    assert chat.index("green tea") < chat.index("message 2")
    assert "1 message(s) added, 0 removed" in chat
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    assert timeline.index(ids[0]) < timeline.index(ids[1]) < timeline.index(ids[2])
    assert "3 checkpoints (1 full, 2 delta)" in page
    assert 'name="_save"' not in page
    assert root_client.post(url, {}).status_code == 403
    # No "History" button (its log is always empty here); the URL leads back to the page.
    assert "historylink" not in page
    history = reverse("admin:tulip_memory_deltacheckpointrecord_history", args=[pk])
    assert root_client.get(history)["Location"] == url


def test_plain_checkpoints_render_as_a_chat_with_their_predecessor(root_client):
    _save_chain("acme", "chat-1", 2)
    pick_tenant(root_client, "acme")
    pk = checkpoint_pk(CheckpointRecord, "acme", "snapshot-2")
    page = root_client.get(reverse("admin:tulip_memory_checkpointrecord_change", args=[pk]))
    content = page.content.decode()
    assert "snapshot-1" in content and "3 message(s) added" in content
    assert "historylink" not in content
    assert 'data-role="tool"' in content


def test_another_tenant_cannot_open_a_checkpoint(root_client):
    ids = _save_chain("acme", "chat-1", 1)
    _save_chain("globex", "chat-2", 1)
    pick_tenant(root_client, "globex")
    pk = checkpoint_pk(DeltaCheckpointRecord, "acme", ids[0])
    url = reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk])
    assert root_client.get(url).status_code == 302  # not found under globex: back to the list


def _damage(model, tenant: str, **where_and_values) -> None:
    values = where_and_values.pop("values")
    with tenant_atomic(tenant):
        assert model.objects.filter(**where_and_values).update(**values) == 1


def test_a_damaged_plain_checkpoint_has_no_message_count_in_the_list(root_client):
    _save_chain("acme", "chat-1", 2)
    _damage(CheckpointRecord, "acme", checkpoint_id="snapshot-1", values={"state": {"messages": 5}})
    pick_tenant(root_client, "acme")
    changelist = root_client.get(reverse("admin:tulip_memory_checkpointrecord_changelist"))
    assert changelist.status_code == 200
    rows = changelist.content.decode()
    damaged_row = rows[rows.index(">snapshot-1<") :].split("</tr>", 1)[0]
    assert '<td class="field-message_count">-</td>' in damaged_row
    assert '<td class="field-message_count">4</td>' in rows  # snapshot-2 is fine


def test_a_damaged_plain_checkpoint_page_says_why_it_cannot_be_read(root_client):
    _save_chain("acme", "chat-1", 2)
    _damage(CheckpointRecord, "acme", checkpoint_id="snapshot-1", values={"state": {"messages": 5}})
    pick_tenant(root_client, "acme")
    pk = checkpoint_pk(CheckpointRecord, "acme", "snapshot-1")
    page = root_client.get(reverse("admin:tulip_memory_checkpointrecord_change", args=[pk]))
    assert "the checkpoint could not be read: " in page.content.decode()
    assert "&#x27;messages&#x27; of type int" in page.content.decode()
    # Its successor renders, without a diff against the unreadable predecessor.
    pk = checkpoint_pk(CheckpointRecord, "acme", "snapshot-2")
    page = root_client.get(reverse("admin:tulip_memory_checkpointrecord_change", args=[pk]))
    content = page.content.decode()
    assert "its predecessor could not be read: " in content
    assert 'data-role="tool"' in content and 'id="tulip-diff"' not in content


def test_a_delta_checkpoint_whose_chain_is_damaged_renders_and_says_why(root_client):
    ids = _save_chain("acme", "chat-1", 3)  # depth 2: full, delta, delta
    _damage(
        DeltaCheckpointRecord,
        "acme",
        thread_id="chat-1",
        chain_depth=1,
        values={"data": bytes.fromhex("deadbeef")},
    )
    pick_tenant(root_client, "acme")
    pk = checkpoint_pk(DeltaCheckpointRecord, "acme", ids[2])
    page = root_client.get(reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk]))
    assert page.status_code == 200
    content = page.content.decode()
    assert "the checkpoint could not be read: " in content
    assert f"checkpoint {ids[1]!r} of thread".replace("'", "&#x27;") in content
    timeline = content[content.index('id="tulip-thread-timeline"') :]
    assert timeline.index(ids[0]) < timeline.index(ids[1]) < timeline.index(ids[2])
    assert "3 checkpoints (1 full, 2 delta)" in content
    # The root still reads; the damaged checkpoint's own page says why it does not.
    root = checkpoint_pk(DeltaCheckpointRecord, "acme", ids[0])
    page = root_client.get(reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[root]))
    assert "message 0" in page.content.decode()
    changelist = root_client.get(reverse("admin:tulip_memory_deltacheckpointrecord_changelist"))
    assert changelist.status_code == 200
