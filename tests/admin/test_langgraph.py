"""The LangGraph threads admin through Django's test client, as the app role under RLS.

The checkpoints come from a real compiled graph (tests.langgraph_agent,
a tool-calling loop with a scripted model) run on DjangoSaver.
"""

from __future__ import annotations

import re
import sys

import pytest
from django.urls import reverse

from tests.admin.conftest import checkpoint_pk, make_staff, pick_tenant
from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.admin import checkpoints as checkpoints_admin
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.models import LangGraphCheckpoint
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "admin:tulip_memory_langgraphcheckpoint_changelist"
CHANGE = "admin:tulip_memory_langgraphcheckpoint_change"


def _config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def run_graph(tenant: str, thread_id: str, turns: int, *, approve: bool = False) -> list[str]:
    """Run the agent ``turns`` turns; the thread's checkpoint ids, newest first."""
    saver = DjangoSaver(tenant=tenant, max_chain_depth=4)
    graph = build_agent(saver, approve=approve)
    for turn in range(turns):
        graph.invoke(user_turn(turn), _config(thread_id))
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config(thread_id))]


def fork_graph(tenant: str, thread_id: str) -> tuple[list[str], str, list[str]]:
    """Two turns, then a third run from the end of the first turn (a fork, as a replay
    with new input is): the checkpoint ids before the fork (newest first), the one
    forked from, the fork's ids (newest first)."""
    before = run_graph(tenant, thread_id, 2)
    saver = DjangoSaver(tenant=tenant, max_chain_depth=4)
    first_turn_end = next(
        t.config for t in saver.list(_config(thread_id)) if t.metadata.get("step") == 4
    )
    build_agent(saver).invoke(user_turn(7), first_turn_end)
    after = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_config(thread_id))]
    return (
        before,
        first_turn_end["configurable"]["checkpoint_id"],
        after[: len(after) - len(before)],
    )


def _pk(tenant: str, checkpoint_id: str) -> int:
    return checkpoint_pk(LangGraphCheckpoint, tenant, checkpoint_id)


def test_the_list_shows_one_row_per_thread_with_its_totals(root_client):
    ids = run_graph("acme", "chat-a", 3)
    run_graph("acme", "chat-b", 1)
    run_graph("globex", "chat-g", 1)
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGELIST)).content.decode()
    assert "LangGraph threads" in page and "2 threads" in page and "chat-g" not in page
    rows = re.findall(r"<tr>.*?</tr>", page[page.index('id="result_list"') :], re.S)[1:]
    assert len(rows) == 2 and "chat-b" in rows[0] and "chat-a" in rows[1]  # newest first
    # chat-a links to its newest checkpoint, with the thread's count and bytes.
    assert f'href="{reverse(CHANGE, args=[_pk("acme", ids[0])])}' in rows[1]
    assert f'field-checkpoint_count">{len(ids)}<' in rows[1]
    stored = DjangoSaver(tenant="acme").storage_bytes("chat-a")
    assert f'field-thread_bytes">{stored}<' in rows[1]


def test_every_checkpoint_lists_them_all_with_working_parent_links(root_client):
    ids = run_graph("acme", "chat-a", 2)
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGELIST), {"show": "checkpoints"}).content.decode()
    assert f"{len(ids)} LangGraph checkpoints" in page
    for checkpoint_id in ids:
        assert checkpoint_id in page
    parent = reverse(CHANGE, args=[_pk("acme", ids[1])])
    assert f'<a href="{parent}">{ids[1]}</a>' in page


def test_a_checkpoint_shows_its_chat_timeline_and_thread_rebuilt_from_splices(
    root_client, monkeypatch
):
    monkeypatch.setattr(checkpoints_admin, "TIMELINE_WINDOW", 100)  # the whole thread
    ids = run_graph("acme", "chat-a", 3)
    with tenant_atomic("acme"):
        # Stored against its parents (the messages as splices): the page shows it whole.
        assert LangGraphCheckpoint.objects.get(checkpoint_id=ids[0]).depth > 0
    pick_tenant(root_client, "acme")
    url = reverse(CHANGE, args=[_pk("acme", ids[0])])
    response = root_client.get(url)
    page = response.content.decode()
    assert response.status_code == 200
    chat = page[page.index('id="tulip-conversation"') : page.index('id="tulip-pending-writes"')]
    roles = re.findall(r'data-role="(\w+)"', chat)
    assert roles == ["user", "assistant", "tool", "assistant"] * 3
    assert "tool call call-2: multiply({&quot;a&quot;: 2, &quot;b&quot;: 3})" in chat
    assert "result of call-2" in chat and "2 times 3 is 6" in chat
    assert "1 message(s) added, 0 removed" in chat  # the last step added the answer
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    assert [timeline.index(i) for i in reversed(ids)] == sorted(timeline.index(i) for i in ids)
    assert "<td>loop</td>" in timeline and "<td>input</td>" in timeline
    assert re.search(r'field-step">.*?<div class="readonly">\d+</div>', page, re.S)
    parent = reverse(CHANGE, args=[_pk("acme", ids[1])])
    assert f'<a href="{parent}">{ids[1]}</a>' in page[page.index("field-parent_link") :]
    assert f"{len(ids)} checkpoints" in page
    # Read-only, and no misleading (empty) History.
    assert 'name="_save"' not in page and "historylink" not in page
    assert root_client.post(url, {}).status_code == 403
    history = root_client.get(reverse("admin:tulip_memory_langgraphcheckpoint_history", args=[1]))
    assert history.status_code == 302 and history["Location"] == reverse(CHANGE, args=[1])


def test_a_checkpoint_whose_parents_are_gone_says_so_and_the_page_still_opens(root_client):
    ids = run_graph("acme", "chat-d", 2)
    with tenant_atomic("acme"):  # the rows holding every value: the later ones need them
        LangGraphCheckpoint.objects.filter(depth=0).delete()
    pick_tenant(root_client, "acme")
    response = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[0])]))
    page = response.content.decode()
    assert response.status_code == 200
    # Values, pending writes, metadata: compressed against the parents, none can be read.
    assert page.count("the checkpoint could not be read") == 3
    assert "a checkpoint its values are stored against is missing" in page
    assert re.search(r'field-step">.*?<div class="readonly">-</div>', page, re.S)
    assert ids[0] in page[page.index('id="tulip-thread-timeline"') :]


def test_pending_writes_of_an_interrupted_run_are_shown(root_client):
    ids = run_graph("acme", "chat-i", 1, approve=True)
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[0])])).content.decode()
    writes = page[page.index('id="tulip-pending-writes"') :]
    assert "__interrupt__" in writes and "multiply" in writes


def test_another_tenant_cannot_open_a_thread(root_client, client):
    ids = run_graph("acme", "chat-a", 1)
    run_graph("globex", "chat-g", 1)
    url = reverse(CHANGE, args=[_pk("acme", ids[0])])
    pick_tenant(root_client, "globex")
    assert root_client.get(url).status_code == 302  # not found under globex: back to the list
    assert "chat-a" not in root_client.get(reverse(CHANGELIST)).content.decode()
    bob = make_staff("bob", ("globex",), "view_langgraphcheckpoint")
    client.force_login(bob)
    assert pick_tenant(client, "acme").status_code == 403
    assert client.get(url, HTTP_X_TENANT="acme").status_code == 302
    assert "chat-a" not in client.get(reverse(CHANGELIST), {"tenant": "acme"}).content.decode()


def test_without_langgraph_the_pages_open_and_name_the_extra(root_client, monkeypatch):
    ids = run_graph("acme", "chat-a", 1)
    pick_tenant(root_client, "acme")
    # As if langgraph were not installed (None in sys.modules blocks an import).
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.base", None)
    monkeypatch.delitem(sys.modules, "tulip_memory.langgraph.saver", raising=False)
    assert "chat-a" in root_client.get(reverse(CHANGELIST)).content.decode()
    response = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[0])]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "pip install &#x27;tulip-memory[langgraph]&#x27;" in page
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    assert all(checkpoint_id in timeline for checkpoint_id in ids)


def test_the_timeline_and_the_list_order_checkpoints_by_time_not_by_row(root_client):
    """Pending writes may arrive before their checkpoint (LangGraph's async durability):
    they create the checkpoint's row early, so row ids are not in checkpoint order."""
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    first = empty_checkpoint()
    second = create_checkpoint(first, None, 1)
    third = create_checkpoint(second, None, 2)
    config = {"configurable": {"thread_id": "early", "checkpoint_ns": ""}}
    saved = saver.put(config, first, {"step": 0}, {})
    # The third checkpoint's writes come first: its row is created before the second's.
    third_config = {"configurable": {**config["configurable"], "checkpoint_id": third["id"]}}
    saver.put_writes(third_config, [("messages", ["early"])], "task-3")
    saved = saver.put(saved, second, {"step": 1}, {})
    saver.put(saved, third, {"step": 2}, {})
    ids = [first["id"], second["id"], third["id"]]
    with tenant_atomic("acme"):
        rows = LangGraphCheckpoint.objects.filter(thread_id="early").order_by("id")
        assert list(rows.values_list("checkpoint_id", flat=True)) == [ids[0], ids[2], ids[1]]
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[2])])).content.decode()
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    assert [timeline.index(i) for i in ids] == sorted(timeline.index(i) for i in ids)
    listing = root_client.get(reverse(CHANGELIST), {"show": "checkpoints"}).content.decode()
    assert [listing.index(i) for i in reversed(ids)] == sorted(listing.index(i) for i in ids)


class _ToMariaDB:
    """Routes the saver's checkpoints to the MariaDB alias, as a site whose database is
    not PostgreSQL does."""

    def db_for_read(self, model, **hints):
        return "mysql" if model is LangGraphCheckpoint else None

    db_for_write = db_for_read


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
def test_on_a_database_that_is_not_postgresql_the_pages_are_hidden_not_a_500(root_client, settings):
    changelist = reverse(CHANGELIST)
    assert root_client.get(changelist).status_code == 200
    assert changelist in root_client.get(reverse("admin:index")).content.decode()
    settings.DATABASE_ROUTERS = [f"{__name__}._ToMariaDB"]
    assert root_client.get(changelist).status_code == 403
    assert changelist not in root_client.get(reverse("admin:index")).content.decode()


def test_a_long_thread_shows_a_window_of_its_timeline_and_a_link_to_the_first_added_message(
    root_client, monkeypatch
):
    monkeypatch.setattr(checkpoints_admin, "TIMELINE_WINDOW", 1)
    ids = list(reversed(run_graph("acme", "chat-a", 2)))  # oldest first
    middle = len(ids) // 2
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[middle])])).content.decode()
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    timeline = timeline[: timeline.index("</table>")]
    shown = re.findall(r'<tr[^>]*><td class="tulip-id"><a href="[^"]*">([^<]+)<', timeline)
    assert shown == ids[middle - 1 : middle + 2]
    earlier, later = middle - 1, len(ids) - middle - 2
    assert f"{earlier} earlier checkpoints are not shown." in page
    assert f"{later} later checkpoint{'s are' if later > 1 else ' is'} not shown." in page
    full_list = reverse(CHANGELIST) + "?show=checkpoints&amp;thread_id=chat-a"
    assert page.count(f'href="{full_list}"') == 2
    listed = root_client.get(full_list.replace("&amp;", "&")).content.decode()
    assert all(i in listed for i in ids)

    # The newest checkpoint added the answer: the top of its chat links to it.
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", ids[-1])])).content.decode()
    chat = page[page.index('id="tulip-conversation"') :]
    assert 'href="#tulip-conversation-first-added"' in chat[: chat.index("data-role")]
    first_added = chat[chat.index('id="tulip-conversation-first-added"') :]
    assert "2 times 3 is 6" in first_added[: first_added.index("</div>")]
    assert chat.count('id="tulip-conversation-first-added"') == 1


def test_a_forked_thread_s_timeline_marks_where_each_fork_starts(root_client, monkeypatch):
    from tulip_memory.admin.langgraph import branches

    monkeypatch.setattr(checkpoints_admin, "TIMELINE_WINDOW", 100)  # the whole thread
    before, forked_from, fork = fork_graph("acme", "forked")
    pick_tenant(root_client, "acme")
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", fork[0])])).content.decode()
    timeline = page[page.index('id="tulip-thread-timeline"') :]
    rows = re.findall(
        r'<tr class="([^"]*)" data-branch="(\d+)"><td class="tulip-id">.*?>([^<]+)</a>', timeline
    )
    assert [checkpoint for *_, checkpoint in rows] == before[::-1] + fork[::-1]
    # Time order; the first line (branch 0), then the fork (branch 1), its first row marked.
    assert [(branch, "fork" in classes) for classes, branch, _ in rows] == (
        [("0", False)] * len(before) + [("1", True)] + [("1", False)] * (len(fork) - 1)
    )
    assert "fork 1 starts" in timeline and "This thread was forked" in page
    marked = timeline[timeline.index('class="fork"') :]
    assert marked.index(forked_from) < marked.index("</tr>")  # its parent: the fork point
    # The first line's pages show the fork too; a thread never forked has no branch column.
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", before[0])])).content.decode()
    assert "fork 1 starts" in page
    straight = run_graph("acme", "straight", 1)
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", straight[0])])).content.decode()
    assert "branch" not in page[page.index('id="tulip-thread-timeline"') :]
    # Forks of forks, and namespaces apart.
    rows = [
        (1, "", "a", None), (2, "", "b", "a"), (3, "", "c", "b"), (4, "", "d", "a"),
        (5, "", "e", "d"), (6, "", "f", "d"), (7, "sub", "x", "b"), (8, "", "g", "c"),
    ]  # fmt: skip
    assert branches(rows) == [
        (0, False), (0, False), (0, False), (1, True), (1, False), (2, True), (0, False),
        (0, False),
    ]  # fmt: skip


def test_the_list_filter_has_a_title_and_a_one_checkpoint_thread_is_singular(root_client):
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    checkpoint = empty_checkpoint()
    config = {"configurable": {"thread_id": "single", "checkpoint_ns": ""}}
    saver.put(config, checkpoint, {"step": 0}, {})
    pick_tenant(root_client, "acme")
    listing = root_client.get(reverse(CHANGELIST)).content.decode()
    assert "By threads or checkpoints" in listing and "By show" not in listing
    page = root_client.get(reverse(CHANGE, args=[_pk("acme", checkpoint["id"])])).content.decode()
    storage = page[page.index("field-thread_storage") :]
    assert "1 checkpoint, " in storage and "(checkpoint, values and writes)" in storage
