"""Fixtures of the manager tests: event capture and stores that count their calls."""

from __future__ import annotations

from typing import Any

import pytest

from tests.event_recorder import EventRecorder
from tests.llm.conftest import server  # noqa: F401 - the chat-server test double, for the LLM extractor
from tulip_memory.store.base import StoreCapabilities
from tulip_memory.store.memory import InMemoryStore


class CountingStore(InMemoryStore):
    """A real InMemoryStore that also counts the calls the manager makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    async def search_many(self, *args: Any, **kwargs: Any):
        self._count("search_many")
        return await super().search_many(*args, **kwargs)

    async def put(self, *args: Any, **kwargs: Any):
        self._count("put")
        return await super().put(*args, **kwargs)

    async def put_batch(self, *args: Any, **kwargs: Any):
        self._count("put_batch")
        return await super().put_batch(*args, **kwargs)

    async def compare_and_put_batch(self, *args: Any, **kwargs: Any):
        self._count("compare_and_put_batch")
        return await super().compare_and_put_batch(*args, **kwargs)


class NonSearchingStore(InMemoryStore):
    """An InMemoryStore that advertises no search (like a plain key-value backend)."""

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities()

    async def search(self, *args: Any, **kwargs: Any):
        raise AssertionError("a store without capabilities.search must not be searched")

    async def search_many(self, *args: Any, **kwargs: Any):
        raise AssertionError("a store without capabilities.search must not be searched")


class BrokenStore(InMemoryStore):
    """An InMemoryStore whose writes fail, as a store that lost its backend would."""

    async def put(self, *args: Any, **kwargs: Any):
        raise ConnectionError("store is down")

    async def put_batch(self, *args: Any, **kwargs: Any):
        raise ConnectionError("store is down")

    async def compare_and_put_batch(self, *args: Any, **kwargs: Any):
        raise ConnectionError("store is down")


def manager_events(sent_events: EventRecorder) -> list[tuple[str, dict[str, Any]]]:
    """The memory manager's events (``memory.*``, not its store's) as (event, payload)."""
    return [(e.event, e.payload) for e in sent_events.sent if e.event.startswith("memory.")]


@pytest.fixture(scope="session")
def celery_env(tmp_path_factory):
    """A Celery queue of this test session only, and the extraction log folder."""
    import os
    import uuid

    queue = f"tulip_memory_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    os.environ["TULIP_TEST_CELERY_QUEUE"] = queue
    os.environ["TULIP_TEST_EXTRACTION_LOG"] = str(tmp_path_factory.mktemp("extraction-log"))
    yield queue
    from tests.manager.celery_setup import delete_queue_keys

    delete_queue_keys(queue)  # every queue of the session


@pytest.fixture
def celery_settings(celery_env, settings):
    """TULIP_MEMORY of the test process = the workers' (same queue, extractor, lease)."""
    from tests.manager.celery_setup import celery_tulip_memory

    settings.TULIP_MEMORY = celery_tulip_memory()
    return settings.TULIP_MEMORY


@pytest.fixture(scope="session")
def workers(celery_env, django_db_setup, tmp_path_factory):
    """Two real Celery worker processes on this session's queue."""
    from tests.manager.celery_setup import Workers

    started = Workers(2, tmp_path_factory.mktemp("workers"))
    try:
        started.start()
        yield started
    finally:
        started.stop()
