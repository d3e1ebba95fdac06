"""Fixtures of the store contract suite: one entry per backend in ``STORE_FACTORIES``.

Every test of ``test_contract.py`` and ``test_contract_stateful.py`` runs once per entry.
A factory receives pytest's ``request`` (and keyword options for the store's constructor,
such as ``clock=`` for the expiry tests) and returns a fresh, empty store; the suite closes
it. Adding a backend is ONE entry, for example PgMemory::

    def _pg(request):
        request.getfixturevalue("transactional_db")  # async ORM runs on another thread
        from tulip_memory.store import PgMemory
        return PgMemory("default")

    STORE_FACTORIES["pg"] = _pg

A factory may be called several times in one test (the stateful test builds a store per
example); tests put their data under a namespace rooted at a fresh random label, so a
backend whose data outlives the store object (a database) never sees earlier examples.

``MinimalStore`` is a test double of the *contract*, not of a database: a dict-backed store
that implements only the abstract methods, so the suite exercises BaseStore's default
``exists``/``get_batch``/``put_batch``/``clear_namespace``/``search_many`` and asserts
StoreCapabilityError for everything it does not advertise.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.store.pg_factory import pg_store
from tulip_memory.core.clock import MonotonicWallClock
from tulip_memory.store import BaseStore, HolographicStore, InMemoryStore, StoreItem
from tulip_memory.store.validation import (
    decode_json,
    prepare_put,
    validate_key,
    validate_limit,
    validate_namespace,
)


class MinimalStore(BaseStore):
    """Only the abstract methods, on a dict of ``StoreItem.to_dict()`` JSON texts."""

    def __init__(self) -> None:
        self._items: dict[tuple[tuple[str, ...], str], str] = {}
        self._clock = MonotonicWallClock(resolution_ns=1_000)

    async def put(self, namespace, key, value, metadata=None, *, ttl=None) -> None:
        prepared = prepare_put(namespace, key, value, metadata)
        self._ttl(ttl)  # no ttl capability: StoreCapabilityError
        previous = await self.get_item(namespace, key)
        now = self._clock.tick_datetime()
        item = StoreItem(
            namespace=namespace,
            key=key,
            value=decode_json(prepared.value_json),
            metadata=decode_json(prepared.metadata_json),
            created_at=previous.created_at if previous else now,
            updated_at=now,
            version=previous.version + 1 if previous else 1,
        )
        self._items[(namespace, key)] = json.dumps(item.to_dict())

    async def get_item(self, namespace, key) -> StoreItem | None:
        validate_namespace(namespace)
        validate_key(key)
        text = self._items.get((namespace, key))
        return None if text is None else StoreItem.from_dict(json.loads(text))

    async def get(self, namespace, key) -> Any:
        item = await self.get_item(namespace, key)
        return None if item is None else item.value

    async def delete(self, namespace, key) -> bool:
        validate_namespace(namespace)
        validate_key(key)
        return self._items.pop((namespace, key), None) is not None

    async def list_keys(self, namespace, limit=100) -> list[str]:
        validate_namespace(namespace)
        validate_limit(limit)
        items = [await self.get_item(ns, key) for ns, key in self._items if ns == namespace]
        items.sort(key=lambda item: (-item.updated_at.timestamp(), item.key))
        return [item.key for item in items[:limit]]


def _holographic_file(request: pytest.FixtureRequest, **options: Any) -> HolographicStore:
    tmp_path = request.getfixturevalue("tmp_path")
    return HolographicStore(tmp_path / f"store-{uuid.uuid4().hex}.sqlite3", **options)


StoreFactory = Callable[..., BaseStore]

STORE_FACTORIES: dict[str, StoreFactory] = {
    "minimal": lambda request, **options: MinimalStore(**options),
    "memory": lambda request, **options: InMemoryStore(**options),
    "holographic-memory": lambda request, **options: HolographicStore(**options),
    "holographic-file": _holographic_file,
    "pg": pg_store,
    "pg-prepared": partial(pg_store, using="prepared"),
}


@pytest.fixture(params=sorted(STORE_FACTORIES))
def store_factory(request: pytest.FixtureRequest) -> Callable[..., BaseStore]:
    """A callable building a fresh store of the parametrised backend (keyword options go
    to the store's constructor)."""
    return partial(STORE_FACTORIES[request.param], request)


@pytest.fixture
async def store(store_factory):
    instance = store_factory()
    yield instance
    await instance.close()


@pytest.fixture
def root() -> str:
    """A fresh namespace root label, so tests never see each other's data."""
    return f"t{uuid.uuid4().hex[:12]}"
