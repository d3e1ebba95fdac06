"""Erasure: the subject of a checkpoint's thread, and the receipts of erased subjects.

* ``subject`` (indexed with the tenant) on the plain, delta and LangGraph checkpoint
  tables: the value of ``TULIP_MEMORY["SUBJECT_METADATA_KEY"]`` in the saved state's
  metadata, so that a subject's threads are found by one index lookup. Existing rows get
  ``''`` (untagged). The LangGraph table exists on PostgreSQL only (migration 0007).
* ``ErasureReceipt``: what ``forget_subject`` removed, when and by whom, with a
  non-reversible reference to the subject; under the tenant row-level security policy,
  and registering its tenants like every tenant table (migration 0008's trigger).

On MariaDB the new identifier columns compare byte-exactly, as migration 0004 made the
others (that operation is not atomic: MariaDB cannot run DDL inside a transaction).
"""

import importlib

import django.utils.timezone
from django.db import migrations, models

import tulip_memory.postgres.operations
import tulip_memory.postgres.rls

_collation = importlib.import_module("tulip_memory.migrations.0004_checkpoint_identifier_collation")
_registry = importlib.import_module("tulip_memory.migrations.0008_admin_tenants")

# table -> its new identifier columns (MariaDB: binary NO PAD collation)
IDENTIFIER_COLUMNS = {
    "tulip_memory_checkpoint": ("subject",),
    "tulip_memory_delta_checkpoint": ("subject",),
    "tulip_memory_erasure_receipt": ("tenant", "subject_ref", "actor"),
}
RECEIPT_TABLE = "tulip_memory_erasure_receipt"


def to_binary(apps, schema_editor) -> None:
    _collation._modify(schema_editor, collate=True, identifier_columns=IDENTIFIER_COLUMNS)


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0008_admin_tenants"),
    ]

    operations = [
        migrations.CreateModel(
            name="ErasureReceipt",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(max_length=255)),
                (
                    "subject_ref",
                    models.CharField(
                        help_text="HMAC-SHA256 of the tenant and the subject (SECRET_KEY)",
                        max_length=64,
                    ),
                ),
                (
                    "counts",
                    models.JSONField(default=dict, help_text="Rows removed or blanked, per kind"),
                ),
                (
                    "actor",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Who asked for the erasure",
                        max_length=255,
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "verbose_name": "erasure receipt",
                "db_table": RECEIPT_TABLE,
                "indexes": [
                    models.Index(
                        fields=["tenant", "subject_ref"], name="tulip_erasure_subject_idx"
                    ),
                    models.Index(fields=["tenant", "-created_at"], name="tulip_erasure_recent_idx"),
                ],
            },
        ),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("ErasureReceipt"),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.RunSQL(
                _registry._trigger_sql(RECEIPT_TABLE),
                f'DROP TRIGGER tulip_register_tenant ON "{RECEIPT_TABLE}";',
            )
        ),
        migrations.AddField(
            model_name="checkpointrecord",
            name="subject",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Who the thread is about (the state's metadata); '' for nobody",
                max_length=255,
            ),
        ),
        migrations.AddField(
            model_name="deltacheckpointrecord",
            name="subject",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Who the thread is about (the state's metadata); '' for nobody",
                max_length=255,
            ),
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddField(
                model_name="langgraphcheckpoint",
                name="subject",
                field=models.CharField(
                    blank=True,
                    default="",
                    help_text="Who the thread is about (the state's metadata); '' for nobody",
                    max_length=255,
                ),
            )
        ),
        migrations.RunPython(to_binary, migrations.RunPython.noop, atomic=False, elidable=False),
        migrations.AddIndex(
            model_name="checkpointrecord",
            index=models.Index(fields=["tenant", "subject"], name="tulip_ckpt_subject_idx"),
        ),
        migrations.AddIndex(
            model_name="deltacheckpointrecord",
            index=models.Index(fields=["tenant", "subject"], name="tulip_dckpt_subject_idx"),
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddIndex(
                model_name="langgraphcheckpoint",
                index=models.Index(fields=["tenant", "subject"], name="tulip_lgckpt_subject_idx"),
            )
        ),
    ]
