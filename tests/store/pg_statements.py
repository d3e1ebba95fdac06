"""The statements PgMemory sends, with their parameters, and their plans (test helpers).

PgMemory's search travels with server-side binding (its query vector in binary), so the
SQL Django logs holds ``$n`` placeholders: to EXPLAIN a search, the tests capture the
statement with its parameters through an execute wrapper and run it again the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from tulip_memory.conf import settings
from tulip_memory.models.store import MemoryItem
from tulip_memory.tenancy.cluster import REGISTER, REGISTERED
from tulip_memory.tenancy.context import pin_statement


@contextmanager
def executions() -> Iterator[list[tuple[str, Any]]]:
    """``(sql, params)`` of every statement run on the default connection meanwhile."""
    calls: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        calls.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield calls


def search_statements(calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The search statements among ``calls`` (no tenant pin, no registering of the tenant
    on Citus, no transaction plumbing)."""
    return [
        (sql, params)
        for sql, params in calls
        if sql.split()[0].upper() not in ("SET", "SAVEPOINT", "RELEASE", "BEGIN", "COMMIT")
        and not sql.startswith("SELECT current_setting(")
        and sql not in (REGISTERED, REGISTER)
    ]


def explain(sql: str, params: Any, *, analyze: bool = False) -> str:
    """The plan of ``sql`` with ``params``, sent as PgMemory sends it (run in a tenant);
    with ``analyze``, run too (what ran, and "never executed" for what did not)."""
    with MemoryItem.objects.all().binary_cursor() as cursor:
        cursor.execute(("EXPLAIN (ANALYZE, TIMING OFF) " if analyze else "EXPLAIN ") + sql, params)
        return "\n".join(line for (line,) in cursor.fetchall())


def explain_analyze(tenant: str, sql: str, params: Any) -> str:
    """:func:`explain` with ``analyze``, in a transaction pinned to ``tenant`` (registered
    already) by the setting alone: on Citus tenant_atomic reads the registry from the
    coordinator's copy, after which Citus refuses an EXPLAIN ANALYZE in the transaction
    ("a local execution has accessed a placement")."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(pin_statement(connection, settings.TENANT_SETTING, tenant))
        return explain(sql, params, analyze=True)
