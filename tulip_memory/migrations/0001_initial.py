"""Store items (PgMemory) with row-level security per tenant.

PostgreSQL gets the full feature set: the vector extension, the vector column, the
unique constraint and indexes (the tenant leads each), the HNSW index when the width
allows it, and ENABLE + FORCE row level security with the tenant policy. On other
vendors (MariaDB, SQLite) only the plain table is created.
"""

from django.db import migrations, models

import tulip_memory.models.store
import tulip_memory.postgres.operations
import tulip_memory.postgres.rls


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        tulip_memory.postgres.operations.EnableVectorExtension(),
        migrations.CreateModel(
            name="MemoryItem",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(help_text="namespace[0]", max_length=255)),
                ("namespace", models.TextField(help_text="The namespace as a '/'-joined path")),
                ("key", models.TextField()),
                ("value", models.JSONField()),
                ("metadata", models.JSONField(default=dict)),
                (
                    "search_text",
                    models.TextField(default="", help_text="Text matched by lexical search"),
                ),
                ("embedding", tulip_memory.models.store.EmbeddingField(blank=True, null=True)),
                (
                    "embedding_source",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="What computed the embedding: 'hrr', 'embedder:<name>', 'external'; '' for none",
                        max_length=100,
                    ),
                ),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
                ("version", models.PositiveBigIntegerField(default=1)),
            ],
            options={
                "verbose_name": "memory",
                "verbose_name_plural": "memories",
                "db_table": "tulip_memory_store_item",
            },
        ),
        # Rows inline in the heap page whenever they fit, vectors above all: pgvector's
        # default storage (EXTENDED) and the default toast_tuple_target (~2 KB) move a
        # vector wider than ~500 dimensions out of line, and every exact distance then
        # reads it back from TOAST chunk by chunk (~2.3x the time at 1024 dimensions).
        # MAIN, not PLAIN: a row that cannot fit a page (over ~2000 dimensions) still goes
        # to TOAST instead of failing, its other columns first. toast_tuple_target = 8160
        # (the maximum) keeps MAIN from pushing the row's small text and JSON columns out
        # of line instead. See docs/pg_store.md, "Storage of the vectors".
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.RunSQL(
                "ALTER TABLE tulip_memory_store_item ALTER COLUMN embedding SET STORAGE MAIN, "
                "SET (toast_tuple_target = 8160)",
                reverse_sql=(
                    "ALTER TABLE tulip_memory_store_item ALTER COLUMN embedding "
                    "SET STORAGE EXTENDED, RESET (toast_tuple_target)"
                ),
            )
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddConstraint(
                model_name="memoryitem",
                constraint=models.UniqueConstraint(
                    fields=("tenant", "namespace", "key"), name="tulip_store_item_uniq"
                ),
            )
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddConstraint(
                model_name="memoryitem",
                constraint=models.CheckConstraint(
                    condition=models.Q(("tenant", ""), _negated=True),
                    name="tulip_store_item_tenant_not_empty",
                ),
            )
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddIndex(
                model_name="memoryitem",
                index=models.Index(
                    fields=["tenant", "namespace", "-updated_at"], name="tulip_store_item_recent"
                ),
            )
        ),
        tulip_memory.postgres.operations.CreateVectorAnnIndex(
            "memoryitem", name="tulip_store_item_embedding_hnsw"
        ),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("memoryitem"),
    ]
