"""PgMemory's entry in the store contract suite (``STORE_FACTORIES["pg"]``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tulip_memory.store import BaseStore


def pg_store(request: pytest.FixtureRequest) -> BaseStore:
    """A PgMemory on the test database, as the application role.

    ``transactional_db``: the store's async ORM calls run on another thread, outside a
    test transaction, so rows are committed (and flushed after the test). The factory is
    called from async fixtures and tests, where Django refuses synchronous database
    set-up, so the fixture is requested from a worker thread.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(request.getfixturevalue, "transactional_db").result()
    from tulip_memory.store import PgMemory

    return PgMemory("default")
