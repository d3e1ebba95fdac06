"""Demo scene: PgMemory on PostgreSQL + pgvector, two tenants isolated by row-level security.

Two companies' memories go into the same table through PgMemory (tenant =
``namespace[0]``); a search only ever ranks its own tenant's rows; then raw SQL, as the
application role, shows what the database itself enforces: with tenant A pinned, B's rows
are invisible and a forged insert under B's name is refused; with no tenant, nothing.
"""

from __future__ import annotations

from typing import TextIO

from asgiref.sync import sync_to_async

from tulip_memory.store import PgMemory

MEMORIES = {
    "acme": {
        "supplier": "Acme buys its anvils from Ironworks Ltd in Sheffield",
        "launch": "Acme launches the rocket skates in spring",
    },
    "globex": {
        "supplier": "Globex buys its reactors from Nuclear Parts Inc",
        "launch": "Globex launches the doomsday device in autumn",
    },
}


def _raw_sql_view() -> list[str]:
    from django.db import DatabaseError, connection, transaction

    from tulip_memory.models.store import MemoryItem
    from tulip_memory.tenancy import tenant_atomic

    # Quoted as the model's own statements quote it (MemoryItemQuerySet).
    table = connection.ops.quote_name(MemoryItem._meta.db_table)
    lines = []
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        (role,) = cursor.fetchone()
        with tenant_atomic("acme"):
            cursor.execute(f"SELECT tenant, count(*) FROM {table} GROUP BY tenant")
            lines.append(
                f"as {role!r} with tenant 'acme' pinned: rows per tenant {cursor.fetchall()}"
            )
            try:
                with transaction.atomic():
                    cursor.execute(
                        f"INSERT INTO {table} (tenant, namespace, key, value, metadata, "
                        "search_text, embedding_source, created_at, updated_at, version) "
                        "VALUES ('globex', 'globex/facts', 'forged', '1', '{}', '', '', now(), "
                        "now(), 1)"
                    )
                lines.append("forged insert under 'globex': ACCEPTED (this must not happen)")
            except DatabaseError as exc:
                lines.append(f"forged insert under 'globex': refused ({str(exc).splitlines()[0]})")
        with transaction.atomic():
            cursor.execute(f"SELECT count(*) FROM {table}")
            lines.append(f"no tenant pinned: {cursor.fetchone()[0]} rows visible")
    return lines


async def pg_store_scene(out: TextIO) -> None:
    store = PgMemory()
    for tenant, memories in MEMORIES.items():
        namespace = (tenant, "facts")
        await store.clear_namespace(namespace)
        await store.put_batch(
            [(namespace, key, {"text": text}, None) for key, text in memories.items()]
        )
        out.write(f"Tenant {tenant!r}: wrote {len(memories)} memories in one bulk upsert\n")
    for tenant in MEMORIES:
        query = "where do we buy from"
        hits = await store.search((tenant, "facts"), query, limit=1)
        out.write(
            f"  search {query!r} in {tenant!r:<9} -> {hits[0].key}: {hits[0].value['text']!r}\n"
        )
    both = await store.search_many([("acme", "facts"), ("acme", "elsewhere")], "rocket", limit=1)
    out.write(
        f"search_many over 2 namespaces of 'acme' (one statement): {[len(r) for r in both]} hits\n"
    )
    try:
        await store.search_many([("acme", "facts"), ("globex", "facts")], "launch")
    except ValueError as exc:
        out.write(f"search_many across tenants refused: {exc}\n")
    for line in await sync_to_async(_raw_sql_view)():
        out.write(f"Raw SQL {line}\n")
