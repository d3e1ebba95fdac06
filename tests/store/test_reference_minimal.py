"""A store implementing only the reference's abstract methods works with every helper.

``ReferenceMinimalStore`` overrides ``put``, ``get``, ``delete`` and ``list_keys`` and
nothing else — not even ``get_item`` — as a third-party store written against the
reference's contract would.
"""

from __future__ import annotations

from typing import Any

import pytest

from tulip_memory.exceptions import StoreCapabilityError
from tulip_memory.store import BaseStore, NamespacedStore, StoreContext


class ReferenceMinimalStore(BaseStore):
    def __init__(self) -> None:
        self.data: dict[tuple[tuple[str, ...], str], Any] = {}

    async def put(self, namespace, key, value, metadata=None) -> None:
        self.data.pop((namespace, key), None)
        self.data[(namespace, key)] = value

    async def get(self, namespace, key) -> Any | None:
        return self.data.get((namespace, key))

    async def delete(self, namespace, key) -> bool:
        return self.data.pop((namespace, key), None) is not None

    async def list_keys(self, namespace, limit=100) -> list[str]:
        keys = [k for (ns, k) in self.data if ns == namespace]
        return list(reversed(keys))[:limit]


async def test_it_instantiates_and_the_defaults_work_over_its_methods():
    store = ReferenceMinimalStore()
    ns = ("users", "ada")
    await store.put(ns, "diet", {"text": "tofu"})
    item = await store.get_item(ns, "diet")
    assert item is not None
    assert (item.namespace, item.key, item.value, item.metadata) == (
        ns,
        "diet",
        {"text": "tofu"},
        {},
    )
    # What get() cannot tell is stated, not invented.
    assert item.version == 0
    assert item.created_at == item.updated_at
    assert item.created_at.utcoffset() is not None
    assert await store.get_item(ns, "missing") is None
    assert await store.exists(ns, "diet") and not await store.exists(ns, "missing")
    await store.put_batch([(ns, "a", 1, None), (ns, "b", 2, {"m": 1})])
    generated = ("users", "generated")
    await store.put_batch(item for item in [(generated, "g", 3, None)])  # read once
    assert await store.get(generated, "g") == 3
    assert await store.get_batch([(ns, "a"), (ns, "b"), (ns, "zz")]) == {(ns, "a"): 1, (ns, "b"): 2}
    scoped = NamespacedStore(store, ns)
    assert await scoped.get("a") == 1
    context = StoreContext(store, user_id="ada")
    await context.remember("theme", "dark")
    assert await context.get_user_memory("theme") == "dark"
    await context.set_global("motd", "hi")
    assert await context.get_global("motd") == "hi"
    assert await store.clear_namespace(ns) == 3
    assert await store.list_keys(ns) == []
    async with store:
        pass


async def test_unadvertised_capabilities_raise_with_no_hint_when_none_is_given():
    store = ReferenceMinimalStore()
    with pytest.raises(StoreCapabilityError) as caught:
        await store.list_namespaces()
    assert caught.value.hint is None
    assert caught.value.capability == "list_namespaces"
    assert str(caught.value) == "ReferenceMinimalStore does not support 'list_namespaces'"
    with pytest.raises(StoreCapabilityError) as caught:
        await store.search(("users", "ada"), "tofu")
    assert caught.value.hint


def test_store_capability_error_without_a_hint():
    error = StoreCapabilityError("search", "SomeStore")
    assert error.hint is None
    assert str(error) == "SomeStore does not support 'search'"
    assert StoreCapabilityError("search", "SomeStore", "use X").hint == "use X"
