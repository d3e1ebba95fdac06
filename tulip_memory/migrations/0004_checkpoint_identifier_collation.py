"""Byte-exact identifiers of every table of the app on MySQL/MariaDB.

The database default collation (``utf8mb4_general_ci`` and the like) compares case-,
accent- and trailing-space-insensitively: tenant ``ACME`` or ``acme `` would read tenant
``acme``'s checkpoints and thread ``t1`` would replace ``T1``. Every identifier column
(tenants, thread/checkpoint/chain/block ids, namespaces, keys, encoder and lease names) of
every table gets a binary NO PAD collation (``utf8mb4_nopad_bin`` on MariaDB,
``utf8mb4_0900_bin`` on MySQL 8; plain ``utf8mb4_bin`` is PAD SPACE, so ``'a' = 'a '``
would still hold). PostgreSQL compares text byte-exactly already: this is a no-op there,
and the models do not change (``makemigrations`` sees nothing). The operation is not
atomic: MariaDB cannot run DDL inside a transaction.
"""

from django.db import migrations

# table -> its identifier columns
IDENTIFIER_COLUMNS = {
    "tulip_memory_checkpoint": ("tenant", "thread_id", "checkpoint_id"),
    "tulip_memory_delta_checkpoint": (
        "tenant",
        "thread_id",
        "checkpoint_id",
        "parent_id",
        "base_id",
    ),
    "tulip_memory_delta_block": ("tenant", "thread_id", "digest"),
    # The store and extraction tables are PostgreSQL's today (PgMemory and the Celery
    # queue refuse other vendors), but exist everywhere: they compare the same way.
    "tulip_memory_store_item": ("tenant", "namespace", "key", "embedding_source"),
    "tulip_memory_extraction_queue": ("tenant", "namespace", "lease_owner"),
    "tulip_memory_extraction_job": ("tenant", "worker"),
}


def _no_pad_binary_collation(connection) -> str:
    with connection.cursor() as cursor:
        for collation in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin"):
            cursor.execute("SHOW COLLATION LIKE %s", [collation])
            if cursor.fetchone():
                return collation
    return "utf8mb4_bin"  # MySQL 5.7: binary, but PAD SPACE


def _modify(schema_editor, collate: bool, identifier_columns=IDENTIFIER_COLUMNS) -> None:
    """Give the identifier columns the binary NO PAD collation (``collate``) or back the
    table's default (later migrations pass their own tables' columns)."""
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = _no_pad_binary_collation(connection) if collate else None
    quote = schema_editor.quote_name
    with connection.cursor() as cursor:
        for table, columns in identifier_columns.items():
            cursor.execute(
                "SELECT column_name, column_type, is_nullable FROM information_schema.columns "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                [table],
            )
            types = {
                name.lower(): (column_type, nullable == "YES")
                for name, column_type, nullable in cursor.fetchall()
            }
            clauses = []
            for column in columns:
                column_type, nullable = types[column]
                charset = f" CHARACTER SET utf8mb4 COLLATE {collation}" if collation else ""
                null = "NULL" if nullable else "NOT NULL"
                clauses.append(f"MODIFY {quote(column)} {column_type}{charset} {null}")
            schema_editor.execute(f"ALTER TABLE {quote(table)} {', '.join(clauses)}")


def to_binary(apps, schema_editor) -> None:
    _modify(schema_editor, collate=True)


def to_table_default(apps, schema_editor) -> None:
    _modify(schema_editor, collate=False)


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0003_memory_manager"),
    ]

    operations = [
        migrations.RunPython(to_binary, to_table_default, atomic=False, elidable=False),
    ]
