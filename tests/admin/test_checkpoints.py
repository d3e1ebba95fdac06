"""The read-only checkpoint admin, through the test client, as the app role under RLS."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.admin.conftest import checkpoint_pk, pick_tenant
from tulip_memory.admin import checkpoints as checkpoints_admin
from tulip_memory.admin.checkpoints import MessageCount
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
    assert "3 checkpoints (1 full, 2 delta) and 1 block:" in page  # one block: singular
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


def test_the_checkpoint_list_counts_messages_in_the_database(root_client):
    """The list reads no state (the whole conversation): the database counts messages."""
    _save_chain("acme", "chat-1", 2)
    pick_tenant(root_client, "acme")
    with CaptureQueriesContext(connection) as queries:
        page = root_client.get(reverse("admin:tulip_memory_checkpointrecord_changelist"))
    rows = page.content.decode()
    assert '<td class="field-message_count">1</td>' in rows  # snapshot-1
    assert '<td class="field-message_count">4</td>' in rows  # snapshot-2
    state = '"tulip_memory_checkpoint"."state"'
    listed = [q["sql"] for q in queries.captured_queries if state in q["sql"]]
    assert listed and all(
        sql.count(state) == sql.count(f"{state} -> 'messages'") for sql in listed
    ), listed


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
def test_the_message_count_is_computed_on_mariadb_too():
    """The checkpoint table also lives on MySQL/MariaDB (the ORM checkpointer)."""
    rows = CheckpointRecord.objects.using("mysql")
    for checkpoint_id, state in (
        ("list", {"messages": [{"role": "user"}, {"role": "assistant"}]}),
        ("empty", {"messages": []}),
        ("not-a-list", {"messages": 5}),
        ("none", {}),
    ):
        rows.create(tenant="acme", thread_id="t", checkpoint_id=checkpoint_id, state=state)
    counts = dict(rows.annotate(n=MessageCount("state")).values_list("checkpoint_id", "n"))
    assert counts == {"list": 2, "empty": 0, "not-a-list": None, "none": None}


@pytest.mark.parametrize(
    "changelist",
    [
        "admin:tulip_memory_checkpointrecord_changelist",
        "admin:tulip_memory_deltacheckpointrecord_changelist",
    ],
)
def test_the_checkpoint_lists_have_no_filter_listing_every_thread(root_client, changelist):
    """A thread filter lists every thread of the tenant (a DISTINCT over the table); the
    search box finds a thread instead."""
    for n in range(3):
        _save_chain("acme", f"chat-{n}", 1)
    pick_tenant(root_client, "acme")
    with CaptureQueriesContext(connection) as queries:
        page = root_client.get(reverse(changelist)).content.decode()
    assert "?thread_id=" not in page
    sqls = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in sqls if "DISTINCT" in sql and '"thread_id"' in sql]
    found = root_client.get(reverse(changelist), {"q": "chat-1"}).content.decode()
    assert "chat-1" in found and "chat-2" not in found


def test_a_long_thread_shows_a_window_of_its_timeline_and_a_link_to_the_first_added_message(
    root_client, monkeypatch
):
    """The page of a checkpoint in a long thread: its neighbours in the timeline (the
    rest counted, with a link to the thread's checkpoints in the list), and a link from
    the top of the chat to the first message added since its parent."""
    monkeypatch.setattr(checkpoints_admin, "TIMELINE_WINDOW", 1)
    ids = _save_chain("acme", "chat-1", 7)
    pick_tenant(root_client, "acme")
    pk = checkpoint_pk(DeltaCheckpointRecord, "acme", ids[4])  # a delta: F D D F D D F
    page = root_client.get(
        reverse("admin:tulip_memory_deltacheckpointrecord_change", args=[pk])
    ).content.decode()
    timeline = page[
        page.index('id="tulip-thread-timeline"') : page.index(
            "</ol>", page.index('id="tulip-thread-timeline"')
        )
    ]
    assert [i for i in ids if i in timeline] == ids[3:6]
    assert "3 earlier checkpoints are not shown." in page
    assert "1 later checkpoint is not shown." in page
    full_list = reverse("admin:tulip_memory_deltacheckpointrecord_changelist") + "?thread_id=chat-1"
    assert page.count(f'href="{full_list}"') == 2
    listed = root_client.get(full_list).content.decode()
    assert all(i in listed for i in ids) and "7 delta checkpoints" in listed

    chat = page[page.index('id="tulip-conversation"') :]
    assert chat.index('href="#tulip-conversation-first-added"') < chat.index("message 0")
    first_added = chat[chat.index('id="tulip-conversation-first-added"') :]
    assert first_added.index("message 4") < first_added.index("</div>")
