"""Checkpoint tables: full snapshots (PostgreSQL/MySQL checkpointers) and delta chains.

Every table has a ``tenant`` column leading its indexes; on PostgreSQL each gets ENABLE +
FORCE row level security with the tenant policy (a no-op on MariaDB).
"""

import django.utils.timezone
from django.db import migrations, models

import tulip_memory.postgres.rls


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="CheckpointRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(max_length=255)),
                ("thread_id", models.CharField(max_length=255)),
                ("checkpoint_id", models.CharField(max_length=128)),
                ("state", models.JSONField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "verbose_name": "checkpoint",
                "db_table": "tulip_memory_checkpoint",
                "indexes": [
                    models.Index(fields=["tenant", "thread_id", "id"], name="tulip_ckpt_order_idx")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "thread_id", "checkpoint_id"), name="tulip_ckpt_id_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="DeltaCheckpointRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(max_length=255)),
                ("thread_id", models.CharField(max_length=255)),
                ("checkpoint_id", models.CharField(max_length=128)),
                ("parent_id", models.CharField(blank=True, default="", max_length=128)),
                ("base_id", models.CharField(max_length=128)),
                ("is_full", models.BooleanField()),
                ("chain_depth", models.PositiveIntegerField()),
                (
                    "blocks",
                    models.JSONField(
                        default=list,
                        help_text="[[digest, message count], ...] of a full checkpoint",
                    ),
                ),
                (
                    "size_bytes",
                    models.PositiveBigIntegerField(help_text="Encoded size before compression"),
                ),
                (
                    "compressed_size_bytes",
                    models.PositiveBigIntegerField(help_text="Stored size of data"),
                ),
                ("data", models.BinaryField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "verbose_name": "delta checkpoint",
                "db_table": "tulip_memory_delta_checkpoint",
                "indexes": [
                    models.Index(
                        fields=["tenant", "thread_id", "id"], name="tulip_dckpt_order_idx"
                    ),
                    models.Index(
                        fields=["tenant", "thread_id", "base_id"], name="tulip_dckpt_base_idx"
                    ),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "thread_id", "checkpoint_id"), name="tulip_dckpt_id_uniq"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="DeltaBlock",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(max_length=255)),
                ("thread_id", models.CharField(max_length=255)),
                ("digest", models.CharField(max_length=64)),
                ("data", models.BinaryField()),
                (
                    "size_bytes",
                    models.PositiveBigIntegerField(help_text="Encoded size before compression"),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                "verbose_name": "delta block",
                "db_table": "tulip_memory_delta_block",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("tenant", "thread_id", "digest"), name="tulip_dblock_digest_uniq"
                    )
                ],
            },
        ),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("checkpointrecord"),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("deltacheckpointrecord"),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("deltablock"),
    ]
