"""The admin in a real browser (tests/admin/browser.py): tenants, memories, checkpoints."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from tests.admin.browser import (
    chat_roles,
    follow,
    follow_parents,
    login,
    off_the_loop,
    open_list_of_tenant,
    switch_status,
    tenant_shown,
)
from tests.admin.conftest import make_staff
from tulip_memory.core.clock import ManualClock, utc_now
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.models import DeltaCheckpointRecord, LangGraphCheckpoint, MemoryItem
from tulip_memory.state import AgentState
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.usefixtures("browser_db")

LANGGRAPH_LIST = "admin:tulip_memory_langgraphcheckpoint_changelist"


@async_to_sync
async def _memories() -> None:
    store = PgMemory()
    await store.put(("acme", "u1", "user"), "drink", {"content": "likes green tea"})
    await store.put(("acme", "u1", "project"), "stack", {"content": "the app runs Django 5"})
    await store.put(
        ("acme", "u1", "project"),
        "decision:decided-use-postgresql-project",
        {"content": "Project: we decided to use PostgreSQL. " + "1" * 400},
    )
    await store.put(
        ("acme", "u1", "_history", "user", "drink"),
        "000000000001",
        {
            "content": "likes black coffee",
            "metadata": {},
            "valid_from": "2026-01-01T10:00:00+00:00",
            "valid_to": "2026-02-01T10:00:00+00:00",
            "version": 1,
        },
    )
    await store.put(("globex", "u9", "user"), "car", {"content": "globex drives a red car"})


@async_to_sync
async def _after_forget():
    store = PgMemory()
    return (
        await store.get(("acme", "u1", "user"), "drink"),
        await store.list_keys(("acme", "u1", "_history", "user", "drink")),
        await store.get(("acme", "u1", "project"), "stack"),
    )


def test_superuser_switches_filters_reads_versions_and_forgets(page, live_server, shoot, superuser):
    off_the_loop(_memories)
    login(page, live_server, "root")
    page.goto(f"{live_server.url}{reverse('admin:tulip_memory_memoryitem_changelist')}")
    assert "0 memories" in page.content()
    shoot("no-tenant")
    page.select_option("#tulip-tenant-bar select", "globex")
    follow(page, "#tulip-tenant-bar button")
    assert tenant_shown(page) == "globex" and "globex drives a red car" in page.content()
    page.click("#tulip-tenant-bar summary")
    page.select_option("#tulip-tenant-bar select", "acme")
    follow(page, "#tulip-tenant-bar button")
    assert tenant_shown(page) == "acme"
    content = page.content()
    assert "likes green tea" in content and "globex" not in page.inner_text("#result_list")
    assert "black coffee" not in content  # past versions are not live memories
    # A long key keeps a readable column; a long unbroken value is cut and wraps in its own.
    key = page.locator("#result_list .field-key", has_text="decision:decided")
    assert key.bounding_box()["width"] >= 140
    cell = page.locator("#result_list td.field-content", has_text="PostgreSQL")
    assert cell.inner_text().endswith("…") and len(cell.inner_text()) == 200
    assert cell.bounding_box()["width"] <= page.locator("#result_list").bounding_box()["width"] / 2
    shoot("memories")

    follow(page, "#changelist-filter a:text-is('project')")
    assert "Django 5" in page.content() and "green tea" not in page.inner_text("#result_list")
    shoot("filtered")
    follow(page, "#changelist-filter a:text-is('user')")
    page.fill("#searchbar", "green tea")
    with page.expect_navigation():
        page.press("#searchbar", "Enter")
    assert page.inner_text("#result_list tbody tr:first-child .field-score") != ""
    shoot("searched")

    follow(page, "#result_list a:text-is('drink')")
    versions = page.inner_text("#tulip-versions")
    assert versions.index("likes black coffee") < versions.index("likes green tea")
    shoot("versions")

    follow(page, "#tulip-forget-form button")
    assert "likes black coffee" in page.inner_text("#tulip-forget-history")
    shoot("forget-confirmation")
    follow(page, "#tulip-forget-confirm")
    assert "Forgot 1 memory and 1 past version." in page.content()
    shoot("forgotten")
    drink, history, stack = off_the_loop(_after_forget)
    assert drink is None and history == [] and stack is not None


@async_to_sync
async def _expired_memory() -> None:
    """A memory written with a one-second ttl an hour ago: expired, not yet swept."""
    store = PgMemory(clock=ManualClock(utc_now() - timedelta(hours=1)))
    await store.put(("acme", "u1", "user"), "herb", {"content": "liked mint"}, ttl=1)


def test_expired_memories_are_behind_the_expiry_filter(page, live_server, shoot, superuser):
    off_the_loop(_memories)
    off_the_loop(_expired_memory)
    login(page, live_server, "root")
    open_list_of_tenant(page, live_server, "admin:tulip_memory_memoryitem_changelist", "acme")
    assert "liked mint" not in page.content() and "likes green tea" in page.content()
    follow(page, "#changelist-filter a:text-is('expired, due for the sweep')")
    assert "liked mint" in page.inner_text("#result_list")
    assert "green tea" not in page.inner_text("#result_list")
    assert page.inner_text("#result_list .field-expired_at").strip()
    shoot("expired-filter")
    follow(page, "#result_list a:text-is('herb')")
    assert "due for the sweep" in page.inner_text(".field-expiry")
    shoot("expired-memory")


def test_staff_of_one_tenant_cannot_reach_another(page, live_server, shoot):
    off_the_loop(_memories)
    make_staff("alice", ("acme",), "view_memoryitem")
    with tenant_atomic("globex"):
        foreign = MemoryItem.objects.get(key="car").pk
    login(page, live_server, "alice")
    changelist = f"{live_server.url}{reverse('admin:tulip_memory_memoryitem_changelist')}"
    page.goto(changelist)
    assert tenant_shown(page) == "acme" and "likes green tea" in page.content()
    assert page.locator("#tulip-tenant-bar select").count() == 0  # one tenant: nothing to pick
    shoot("own-tenant")

    # The switcher refuses a tenant the user is not a member of.
    assert switch_status(page, live_server, "globex") == 403
    # A typed URL with the other tenant's primary key finds nothing.
    page.goto(f"{live_server.url}{reverse('admin:tulip_memory_memoryitem_change', args=[foreign])}")
    assert "doesn\u2019t exist" in page.content() and "red car" not in page.content()
    shoot("foreign-pk")
    page.goto(f"{changelist}?tenant=globex")
    assert "red car" not in page.content() and tenant_shown(page) == "acme"
    page.context.set_extra_http_headers({"X-Tenant": "globex"})
    page.goto(changelist)
    assert "red car" not in page.content() and "likes green tea" in page.content()
    shoot("header-ignored")


@async_to_sync
async def _chain() -> list[str]:
    checkpointer = DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"), max_chain_depth=8)
    state = AgentState()
    ids = []
    for text in ("hello", "what do I drink?", "thanks"):
        state.messages.append(Message(Role.USER, text))
        if text == "what do I drink?":
            call = ToolCall("c1", "recall", {"query": "drink"})
            state.messages.append(Message(Role.ASSISTANT, "", tool_calls=[call]))
            state.messages.append(Message(Role.TOOL, "likes green tea", tool_call_id="c1"))
        state.messages.append(Message(Role.ASSISTANT, f"reply to {text}"))
        ids.append(await checkpointer.save(state, "chat-1"))
    other = DeltaCheckpointer(ORMDeltaStorage("default", tenant="globex"))
    await other.save(AgentState(messages=[Message(Role.USER, "globex chat")]), "chat-1")
    return ids


def test_a_checkpoint_chain_is_followed_by_its_parent_links(page, live_server, shoot, superuser):
    ids = off_the_loop(_chain)
    login(page, live_server, "root")
    open_list_of_tenant(
        page, live_server, "admin:tulip_memory_deltacheckpointrecord_changelist", "acme"
    )
    shoot("chain-list")
    follow(page, f"#result_list a:text-is('{ids[-1]}')")
    assert chat_roles(page) == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    chat = page.inner_text("#tulip-conversation")
    assert "recall" in chat and "likes green tea" in chat and "reply to thanks" in chat
    assert "2 message(s) added" in page.inner_text("#tulip-diff")
    assert "3 checkpoints" in page.inner_text(".field-thread_storage")
    visited = follow_parents(page, shoot, "acme", "checkpoint")
    assert visited == list(reversed(ids))
    assert "No parent" in page.inner_text("#tulip-diff")
    assert "globex chat" not in page.content()
    with tenant_atomic("acme"):
        assert DeltaCheckpointRecord.objects.get(checkpoint_id=visited[-1]).is_full
    assert re.search(r"hello", page.inner_text("#tulip-conversation"))


def test_a_damaged_delta_checkpoint_says_why_it_cannot_be_read(page, live_server, shoot, superuser):
    ids = off_the_loop(_chain)
    with tenant_atomic("acme"):
        damaged = DeltaCheckpointRecord.objects.filter(checkpoint_id=ids[1])
        assert damaged.update(data=bytes.fromhex("deadbeef")) == 1
    login(page, live_server, "root")
    open_list_of_tenant(
        page, live_server, "admin:tulip_memory_deltacheckpointrecord_changelist", "acme"
    )
    follow(page, f"#result_list a:text-is('{ids[-1]}')")
    shoot("damaged")
    reason = page.inner_text(".field-conversation .tulip-unread")
    assert reason.startswith("the checkpoint could not be read: ")
    assert ids[1] in reason and "bad delta" in reason
    assert ids[0] in page.inner_text("#tulip-thread-timeline")
    assert "3 checkpoints" in page.inner_text(".field-thread_storage")


def _langgraph_threads() -> list[str]:
    """Two turns of the LangGraph agent on DjangoSaver (acme) and one of globex's."""
    from tests.admin.test_langgraph import run_graph

    ids = run_graph("acme", "chat-lg", 2)
    run_graph("globex", "chat-globex", 1)
    return ids


def test_a_langgraph_thread_is_followed_from_newest_to_root(page, live_server, shoot, superuser):
    ids = off_the_loop(_langgraph_threads)
    login(page, live_server, "root")
    open_list_of_tenant(page, live_server, LANGGRAPH_LIST, "acme")
    assert "chat-globex" not in page.inner_text("#result_list")
    shoot("lg-threads")
    follow(page, "#result_list a:text-is('chat-lg')")
    assert chat_roles(page) == ["user", "assistant", "tool", "assistant"] * 2
    chat = page.inner_text("#tulip-conversation")
    assert "multiply" in chat and "1 times 2 is 2" in chat and "turn 1: what is 1 times 2" in chat
    assert page.locator("#tulip-thread-timeline tbody tr").count() == len(ids)

    def second_tool_call(n: int) -> None:
        if n == 2:  # the second turn's tool call, before its result and answer
            chat = page.inner_text("#tulip-conversation")
            assert "1 times 2 is 2" in chat and "call-2" in chat and "2 times 3" not in chat

    visited = follow_parents(page, shoot, "acme", "lg-checkpoint", second_tool_call)
    assert visited == ids  # newest first, down to the root
    assert page.inner_text(".field-source .readonly") == "input"
    assert "chat-globex" not in page.content()
    page.goto(f"{live_server.url}{reverse(LANGGRAPH_LIST)}")
    follow(page, "#changelist-filter a:text-is('every checkpoint')")
    assert page.locator("#result_list tbody tr").count() == len(ids)
    shoot("lg-every-checkpoint")


def test_a_forked_langgraph_thread_shows_where_its_fork_starts(page, live_server, shoot, superuser):
    from tests.admin.test_langgraph import fork_graph, run_graph

    def threads():
        run_graph("globex", "chat-globex", 1)  # a second tenant: the switcher shows
        return fork_graph("acme", "chat-fork")

    _before, forked_from, fork = off_the_loop(threads)
    login(page, live_server, "root")
    open_list_of_tenant(page, live_server, LANGGRAPH_LIST, "acme")
    follow(page, "#result_list a:text-is('chat-fork')")
    start = page.locator("#tulip-thread-timeline tr.fork")
    assert start.count() == 1 and start.is_visible()
    assert "fork 1 starts" in start.inner_text() and forked_from in start.inner_text()
    assert page.locator("#tulip-thread-timeline tr[data-branch='1']").count() == min(len(fork), 11)
    start.scroll_into_view_if_needed()
    shoot("lg-forked-timeline")


def test_staff_of_another_tenant_cannot_reach_a_langgraph_thread(page, live_server, shoot):
    ids = off_the_loop(_langgraph_threads)
    make_staff("gina", ("globex",), "view_langgraphcheckpoint")
    with tenant_atomic("acme"):
        foreign = LangGraphCheckpoint.objects.get(checkpoint_id=ids[0]).pk
    login(page, live_server, "gina")
    page.goto(f"{live_server.url}{reverse(LANGGRAPH_LIST)}")
    assert tenant_shown(page) == "globex" and "chat-globex" in page.inner_text("#result_list")
    assert "chat-lg" not in page.content()
    shoot("lg-own-tenant")
    assert switch_status(page, live_server, "acme") == 403
    url = reverse("admin:tulip_memory_langgraphcheckpoint_change", args=[foreign])
    page.goto(f"{live_server.url}{url}")
    assert "doesn\u2019t exist" in page.content() and "turn 1" not in page.content()
    shoot("lg-foreign-pk")
