"""The tenant registry and admin memberships (names only: no row-level security), the
permissions to forget a memory, retry a failed extraction job and see a job's
conversation from the admin, and — on PostgreSQL — the triggers that
register a tenant when a row of it is first inserted into any tenant table.

The triggers are statement-level (one ``INSERT ... SELECT DISTINCT ... ON CONFLICT DO
NOTHING`` per inserting statement, over its transition table) and run a ``SECURITY
DEFINER`` function owned by the migrating role, so the application role needs no
privilege on the registry (:mod:`tulip_memory.postgres.tenant_registry`: its search path pinned,
every name in it qualified; migration 0016 pins the function of a database migrated
before). Tenants written before this migration are not back-filled
(under FORCE ROW LEVEL SECURITY the migrating role cannot see them either): they appear
once a row of theirs is inserted again, or when added by hand in the admin's registry.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from tulip_memory.postgres.operations import PostgreSQLOnly
from tulip_memory.postgres.tenant_registry import FUNCTION, AddTenantRegistration

# The tenant tables at this migration (tulip_memory.postgres.rls.tenant_tables() lists them).
TENANT_TABLES = (
    "tulip_memory_store_item",
    "tulip_memory_checkpoint",
    "tulip_memory_delta_checkpoint",
    "tulip_memory_delta_block",
    "tulip_memory_extraction_queue",
    "tulip_memory_extraction_job",
    "tulip_memory_langgraph_checkpoint",
    "tulip_memory_langgraph_blob",
    "tulip_memory_langgraph_write",
)


def _trigger_sql(table: str) -> str:
    return (
        f'CREATE TRIGGER tulip_register_tenant AFTER INSERT ON "{table}" '
        f"REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}();"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0007_langgraph"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Tenant",
            fields=[
                (
                    "name",
                    models.CharField(
                        max_length=255, primary_key=True, serialize=False, verbose_name="name"
                    ),
                ),
                (
                    "registered_at",
                    models.DateTimeField(auto_now_add=True, verbose_name="registered at"),
                ),
            ],
            options={
                "verbose_name": "tenant",
                "db_table": "tulip_memory_tenant",
                "ordering": ("name",),
            },
        ),
        migrations.CreateModel(
            name="TenantMembership",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="tulip_memory.tenant",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tulip_tenants",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "tenant membership",
                "db_table": "tulip_memory_tenant_membership",
                "constraints": [
                    models.UniqueConstraint(fields=("user", "tenant"), name="tulip_membership_uniq")
                ],
            },
        ),
        migrations.AlterModelOptions(
            name="memoryitem",
            options={
                "permissions": [("forget_memoryitem", "Can forget a memory and its history")],
                "verbose_name": "memory",
                "verbose_name_plural": "memories",
            },
        ),
        migrations.AlterModelOptions(
            name="extractionjob",
            options={
                "permissions": [
                    ("retry_extractionjob", "Can retry a failed extraction job"),
                    ("view_extractionjob_payload", "Can see an extraction job's conversation"),
                ],
                "verbose_name": "extraction job",
            },
        ),
        AddTenantRegistration("tenant"),
        PostgreSQLOnly(
            migrations.RunSQL(
                [_trigger_sql(t) for t in TENANT_TABLES],
                [f'DROP TRIGGER tulip_register_tenant ON "{t}";' for t in TENANT_TABLES],
            )
        ),
    ]
