"""PgMemory and StoreContext under a bound tenant: no call crosses into another tenant."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from tulip_memory.exceptions import TenantError
from tulip_memory.store import InMemoryStore, PgMemory, StoreContext
from tulip_memory.tenancy import tenant_context

sync = async_to_sync


# --- StoreContext is tenant-first on a tenant-isolated store -------------------------------


@pytest.mark.django_db
def test_globals_and_users_of_two_tenants_stay_apart():
    store = PgMemory()
    with tenant_context("acme"):
        acme = StoreContext(store, user_id="u1")
        sync(acme.set_global)("motd", "acme only")
        sync(acme.remember)("diet", "tofu")
    with tenant_context("beta"):
        beta = StoreContext(store, user_id="u1")
        assert sync(beta.get_global)("motd") is None
        assert sync(beta.get_user_memory)("diet") is None
        sync(beta.set_global)("motd", "beta only")
    with tenant_context("acme"):
        assert sync(acme.get_global)("motd") == "acme only"
        assert sync(store.get)(("acme", "users", "u1", "memories"), "diet") == "tofu"
        assert sync(store.get)(("acme", "global"), "motd") == "acme only"
    assert (acme.tenant, beta.tenant) == ("acme", "beta")


@pytest.mark.django_db
def test_an_explicit_tenant_works_without_a_bound_one():
    store = PgMemory()
    context = StoreContext(store, user_id="u1", tenant="acme")
    sync(context.remember)("diet", "tofu")
    assert sync(store.get)(("acme", "users", "u1", "memories"), "diet") == "tofu"
    assert sync(context.for_session("s1").put)("step", 1) is None
    assert sync(store.get)(("acme", "sessions", "s1"), "step") == 1


def test_a_tenant_isolated_store_without_a_tenant_is_refused():
    with pytest.raises(TenantError, match="no tenant is bound"):
        StoreContext(PgMemory(), user_id="u1")
    with pytest.raises(ValueError, match="tenant must not be empty"):
        StoreContext(PgMemory(), user_id="u1", tenant="")


def test_a_store_without_tenants_keeps_the_plain_namespaces():
    store = InMemoryStore()
    with tenant_context("acme"):
        context = StoreContext(store, user_id="u1")
        sync(context.remember)("diet", "tofu")
        sync(context.set_global)("motd", "hi")
    assert context.tenant is None
    assert sync(store.get)(("users", "u1", "memories"), "diet") == "tofu"
    assert sync(store.get)(("global",), "motd") == "hi"
    tenant_first = StoreContext(store, user_id="u1", tenant="acme")
    sync(tenant_first.set_global)("motd", "acme's")
    assert sync(store.get)(("acme", "global"), "motd") == "acme's"


# --- PgMemory refuses another tenant than the bound one ------------------------------------


@pytest.mark.django_db
def test_calls_for_another_tenant_than_the_bound_one_raise_and_change_nothing():
    store = PgMemory()
    beta = ("beta", "users", "u1")
    sync(store.put)(beta, "k", "beta's")
    calls = {
        "get": lambda: store.get(beta, "k"),
        "get_item": lambda: store.get_item(beta, "k"),
        "exists": lambda: store.exists(beta, "k"),
        "put": lambda: store.put(beta, "k", "overwritten"),
        "put_with_embedding": lambda: store.put_with_embedding(
            beta, "k", "x", [1.0] * store.capabilities.embedding_dimension
        ),
        "delete": lambda: store.delete(beta, "k"),
        "clear_namespace": lambda: store.clear_namespace(beta),
        "list_keys": lambda: store.list_keys(beta),
        "search": lambda: store.search(beta, "beta"),
        "search_many": lambda: store.search_many([beta]),
        "search_by_embedding": lambda: store.search_by_embedding(
            beta, [1.0] * store.capabilities.embedding_dimension
        ),
        "get_embedding": lambda: store.get_embedding(beta, "k"),
        "list_namespaces": lambda: store.list_namespaces(("beta",)),
        "put_batch": lambda: store.put_batch(
            [(("acme", "x"), "k", 1, None), (beta, "k", "overwritten", None)]
        ),
        "get_batch": lambda: store.get_batch([(("acme", "x"), "k"), (beta, "k")]),
    }
    with tenant_context("acme"):
        for call in calls.values():

            async def run(call=call):
                return await call()

            with pytest.raises(TenantError, match="'beta' but tenant 'acme' is bound"):
                sync(run)()
    item = sync(store.get_item)(beta, "k")
    assert (item.value, item.version) == ("beta's", 1)
    assert sync(store.get)(("acme", "x"), "k") is None


@pytest.mark.django_db
def test_the_bound_tenant_and_unbound_code_still_work_one_tenant_at_a_time():
    store = PgMemory()
    with tenant_context("acme"):
        sync(store.put)(("acme", "n"), "k", 1)
        assert sync(store.list_namespaces)() == [("acme", "n")]
    # Tooling that crosses tenants: outside any binding, or binding each in turn.
    sync(store.put)(("beta", "n"), "k", 2)
    for tenant, value in (("acme", 1), ("beta", 2)):
        with tenant_context(tenant):
            assert sync(store.get)((tenant, "n"), "k") == value
