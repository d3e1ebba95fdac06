"""Celery extraction queue of the memory manager: one queue row per namespace, one job row
per ended session.

Both tables carry the ``tenant`` and, on PostgreSQL, get ENABLE + FORCE row level security
with the tenant policy (a no-op on MariaDB). The unique (tenant, namespace) constraint is
PostgreSQL's (MariaDB cannot index a TEXT column whole; the Celery mode needs PostgreSQL).
"""

import django.db.models.deletion
from django.db import migrations, models

import tulip_memory.postgres.operations
import tulip_memory.postgres.rls


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0002_checkpoints"),
    ]

    operations = [
        migrations.CreateModel(
            name="ExtractionQueue",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(help_text="namespace[0]", max_length=255)),
                (
                    "namespace",
                    models.TextField(help_text="The memory namespace as a '/'-joined path"),
                ),
                ("last_sequence", models.PositiveBigIntegerField(default=0)),
                ("lease_owner", models.CharField(blank=True, default="", max_length=255)),
                ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                ("recheck_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "extraction queue",
                "db_table": "tulip_memory_extraction_queue",
            },
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddConstraint(
                model_name="extractionqueue",
                constraint=models.UniqueConstraint(
                    fields=("tenant", "namespace"), name="tulip_extraction_queue_uniq"
                ),
            )
        ),
        migrations.CreateModel(
            name="ExtractionJob",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tenant", models.CharField(max_length=255)),
                ("sequence", models.PositiveBigIntegerField()),
                ("payload", models.JSONField()),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("pending", "Pending"),
                            ("running", "Running"),
                            ("done", "Done"),
                            ("failed", "Failed"),
                        ],
                        default="pending",
                        max_length=16,
                    ),
                ),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("error", models.TextField(blank=True, default="")),
                (
                    "run_after",
                    models.DateTimeField(blank=True, help_text="Retry not before", null=True),
                ),
                (
                    "worker",
                    models.CharField(
                        blank=True, default="", help_text="Last runner", max_length=255
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "queue",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="jobs",
                        to="tulip_memory.extractionqueue",
                    ),
                ),
            ],
            options={
                "verbose_name": "extraction job",
                "db_table": "tulip_memory_extraction_job",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("queue", "sequence"), name="tulip_extraction_job_seq_uniq"
                    )
                ],
            },
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddIndex(
                model_name="extractionjob",
                index=models.Index(
                    condition=models.Q(("state__in", ["pending", "running"])),
                    fields=["tenant", "queue", "sequence"],
                    name="tulip_extraction_job_open_idx",
                ),
            )
        ),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("extractionqueue"),
        tulip_memory.postgres.rls.EnableTenantRowLevelSecurity("extractionjob"),
    ]
