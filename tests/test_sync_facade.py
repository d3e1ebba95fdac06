"""sync_facade: the async APIs from a plain synchronous Django view, on the real database."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.test import Client, override_settings
from django.urls import path

from tulip_memory.backends import PostgreSQLCheckpointer
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState
from tulip_memory.store import PgMemory
from tulip_memory.sync_facade import SyncFacade, sync_facade
from tulip_memory.tenancy import tenant_context


def remember(request: HttpRequest, tenant: str) -> JsonResponse:
    """A synchronous view using a store, a memory manager and a checkpointer."""
    user = request.GET["user"]
    with tenant_context(tenant), sync_facade(PgMemory()) as store:
        store.put((tenant, "users", user), "theme", {"content": "likes the dark theme"})
        hits = store.search((tenant, "users", user), query="dark theme")
        manager = sync_facade(LLMMemoryManager(store.target, namespace_prefix=(tenant, user)))
        manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
        recalled = manager.on_session_start(AgentState(messages=[Message(Role.USER, "hi")]))
        with sync_facade(PostgreSQLCheckpointer(tenant=tenant)) as checkpointer:
            saved = checkpointer.save(recalled, user)
            loaded = checkpointer.load(user)
        in_view_transaction = connection.in_atomic_block
    return JsonResponse(
        {
            "hits": [hit.key for hit in hits],
            "block": recalled.messages[0].content,
            "checkpoint": saved,
            "same_state": loaded == recalled,
            "in_view_transaction": in_view_transaction,
        }
    )


urlpatterns = [path("remember/<str:tenant>/", remember)]


@pytest.mark.django_db(transaction=True)
@override_settings(ROOT_URLCONF=__name__)
def test_a_sync_view_uses_store_manager_and_checkpointer_through_the_facade(settings):
    settings.DATABASES["default"]["ATOMIC_REQUESTS"] = True
    try:
        response = Client().get("/remember/acme/", {"user": "u1"})
    finally:
        settings.DATABASES["default"]["ATOMIC_REQUESTS"] = False
    assert response.status_code == 200, response.content
    body = json.loads(response.content)
    assert body["hits"] == ["theme"]
    assert "The user is a nurse." in body["block"]
    assert body["same_state"] is True
    assert body["in_view_transaction"] is True  # the ORM work joined the view's transaction
    store = sync_facade(PgMemory())
    assert store.get(("acme", "users", "u1"), "theme") == {"content": "likes the dark theme"}


@pytest.mark.django_db(transaction=True)
def test_the_orm_work_joins_the_callers_transaction_and_rolls_back_with_it():
    store = sync_facade(PgMemory())
    with pytest.raises(RuntimeError, match="undo"), transaction.atomic():
        store.put(("acme", "rollback"), "k", {"content": "written"})
        assert store.get(("acme", "rollback"), "k") == {"content": "written"}
        raise RuntimeError("undo")
    assert store.get(("acme", "rollback"), "k") is None


def test_bad_input_is_refused_by_name():
    store = PgMemory.__new__(PgMemory)
    with pytest.raises(ValueError, match="got a SyncFacade"):
        sync_facade(SyncFacade(store))

    async def coroutine() -> None:
        return None

    pending = coroutine()
    with pytest.raises(ValueError, match="not an awaitable"):
        sync_facade(pending)
    pending.close()


async def test_inside_a_running_event_loop_the_facade_refuses_instead_of_deadlocking():
    from tulip_memory.store import InMemoryStore

    with pytest.raises(RuntimeError, match=r"AsyncToSync.*await"):
        sync_facade(InMemoryStore()).put(("a",), "k", 1)
