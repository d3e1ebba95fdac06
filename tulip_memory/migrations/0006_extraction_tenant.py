"""The directory of tenants that enqueued extraction jobs, where the periodic sweep looks.

Not under row-level security, by design (see :class:`tulip_memory.models.ExtractionTenant`):
it holds tenant names only. On MySQL/MariaDB its name column gets the byte-exact
collation every identifier column has (migration 0004). Tenants whose jobs were enqueued
before this migration are listed again at their next enqueue; the sweep cannot find
their older queues before that (row-level security hides them from a listing).
"""

import importlib

from django.db import migrations, models

_COLLATION = importlib.import_module("tulip_memory.migrations.0004_checkpoint_identifier_collation")
IDENTIFIER_COLUMNS = {"tulip_memory_extraction_tenant": ("name",)}


def to_binary(apps, schema_editor) -> None:
    _COLLATION._modify(schema_editor, collate=True, identifier_columns=IDENTIFIER_COLUMNS)


def to_table_default(apps, schema_editor) -> None:
    _COLLATION._modify(schema_editor, collate=False, identifier_columns=IDENTIFIER_COLUMNS)


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0005_extraction_job_usage"),
    ]

    operations = [
        migrations.CreateModel(
            name="ExtractionTenant",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=255, unique=True)),
            ],
            options={
                "verbose_name": "extraction tenant",
                "db_table": "tulip_memory_extraction_tenant",
            },
        ),
        migrations.RunPython(to_binary, to_table_default, atomic=False, elidable=False),
    ]
