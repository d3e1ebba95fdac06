"""PgMemory's entry in the store contract suite (``STORE_FACTORIES["pg"]``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection

from tulip_memory.store import BaseStore
from tulip_memory.tenancy import tenant_context


def pg_store(request: pytest.FixtureRequest, using: str = "default", **options: Any) -> BaseStore:
    """A PgMemory on the test database, as the application role (through the alias
    ``using``: "prepared" allows prepared statements).

    The contract tests are async and the store's ORM calls run on Django's sync worker
    thread, so the test's own transaction could not hold them: the database is unblocked
    for the test (committed writes, like production) and the store table is truncated
    afterwards. (``transactional_db`` cannot be requested here: the factory is called
    from async code, where Django refuses synchronous database set-up; the session's
    migrations are requested from a worker thread for the same reason.)
    """
    from tulip_memory.store import PgMemory

    with ThreadPoolExecutor(max_workers=1) as pool:  # migrations, once per session
        pool.submit(request.getfixturevalue, "django_db_setup").result()
    unblocked = request.getfixturevalue("django_db_blocker").unblock()
    unblocked.__enter__()

    def clean_up() -> None:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE tulip_memory_store_item")
        unblocked.__exit__(None, None, None)

    request.addfinalizer(clean_up)
    if "root" not in request.fixturenames:
        return PgMemory(using, **options)
    root = request.getfixturevalue("root")

    class TenantBoundPgMemory(PgMemory):
        """``list_namespaces()`` without a prefix lists the test's tenant, bound the way
        TenantMiddleware binds a request's: row-level security shows one tenant only."""

        async def list_namespaces(self, prefix: Any = None, limit: Any = 100) -> Any:
            if prefix is not None:
                return await super().list_namespaces(prefix, limit)
            with tenant_context(root):
                return await super().list_namespaces(prefix, limit)

    return TenantBoundPgMemory(using, **options)
