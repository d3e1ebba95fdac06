"""Tables of the LangGraph checkpoint saver (tulip_memory.langgraph.DjangoSaver).

Checkpoints, channel values (whole, or splices of an earlier version's list) and pending
writes, each under the tenant row-level security policy;
the tables are PostgreSQL's only (the saver refuses other vendors, and MariaDB's 3072-byte
index keys could not hold their identifiers).
"""

import django.utils.timezone
from django.db import migrations, models

import tulip_memory.postgres.operations
import tulip_memory.postgres.rls


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0006_store_item_search_vector"),
    ]

    operations = [
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.CreateModel(
                name="LangGraphBlob",
                fields=[
                    (
                        "id",
                        models.BigAutoField(
                            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                        ),
                    ),
                    ("tenant", models.CharField(max_length=255)),
                    ("thread_id", models.CharField(max_length=255)),
                    ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                    ("channel", models.CharField(max_length=255)),
                    ("version", models.CharField(max_length=255)),
                    (
                        "parent_version",
                        models.CharField(
                            blank=True,
                            default="",
                            help_text="The version this splice applies to; empty for a whole value",
                            max_length=255,
                        ),
                    ),
                    (
                        "base_version",
                        models.CharField(
                            help_text="The whole value its chain starts from", max_length=255
                        ),
                    ),
                    ("depth", models.PositiveIntegerField(default=0)),
                    ("type", models.CharField(max_length=64)),
                    ("data", models.BinaryField(null=True)),
                ],
                options={
                    "verbose_name": "LangGraph channel value",
                    "db_table": "tulip_memory_langgraph_blob",
                    "indexes": [
                        models.Index(
                            fields=[
                                "tenant",
                                "thread_id",
                                "checkpoint_ns",
                                "channel",
                                "base_version",
                            ],
                            name="tulip_lgblob_chain_idx",
                        )
                    ],
                    "constraints": [
                        models.UniqueConstraint(
                            fields=("tenant", "thread_id", "checkpoint_ns", "channel", "version"),
                            name="tulip_lgblob_version_uniq",
                        )
                    ],
                },
            )
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.CreateModel(
                name="LangGraphCheckpoint",
                fields=[
                    (
                        "id",
                        models.BigAutoField(
                            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                        ),
                    ),
                    ("tenant", models.CharField(max_length=255)),
                    ("thread_id", models.CharField(max_length=255)),
                    ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                    ("checkpoint_id", models.CharField(max_length=128)),
                    (
                        "parent_checkpoint_id",
                        models.CharField(blank=True, default="", max_length=128),
                    ),
                    ("run_id", models.CharField(blank=True, default="", max_length=255)),
                    ("checkpoint_type", models.CharField(max_length=64)),
                    (
                        "checkpoint",
                        models.BinaryField(help_text="The checkpoint without its channel values"),
                    ),
                    ("channel_versions", models.JSONField(default=dict)),
                    ("metadata_type", models.CharField(max_length=64)),
                    ("metadata", models.BinaryField()),
                    ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ],
                options={
                    "verbose_name": "LangGraph checkpoint",
                    "db_table": "tulip_memory_langgraph_checkpoint",
                    "indexes": [
                        models.Index(fields=["tenant", "run_id"], name="tulip_lgckpt_run_idx")
                    ],
                    "constraints": [
                        models.UniqueConstraint(
                            fields=("tenant", "thread_id", "checkpoint_ns", "checkpoint_id"),
                            name="tulip_lgckpt_id_uniq",
                        )
                    ],
                },
            )
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.CreateModel(
                name="LangGraphWrite",
                fields=[
                    (
                        "id",
                        models.BigAutoField(
                            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                        ),
                    ),
                    ("tenant", models.CharField(max_length=255)),
                    ("thread_id", models.CharField(max_length=255)),
                    ("checkpoint_ns", models.CharField(blank=True, default="", max_length=255)),
                    ("checkpoint_id", models.CharField(max_length=128)),
                    ("task_id", models.CharField(max_length=255)),
                    ("task_path", models.CharField(blank=True, default="", max_length=255)),
                    ("idx", models.IntegerField()),
                    ("channel", models.CharField(max_length=255)),
                    ("type", models.CharField(max_length=64)),
                    ("data", models.BinaryField(null=True)),
                ],
                options={
                    "verbose_name": "LangGraph pending write",
                    "db_table": "tulip_memory_langgraph_write",
                    "constraints": [
                        models.UniqueConstraint(
                            fields=(
                                "tenant",
                                "thread_id",
                                "checkpoint_ns",
                                "checkpoint_id",
                                "task_id",
                                "idx",
                            ),
                            name="tulip_lgwrite_uniq",
                        )
                    ],
                },
            )
        ),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("langgraphcheckpoint"),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("langgraphblob"),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("langgraphwrite"),
    ]
