"""Expiry of store items: ``expires_at`` on PgMemory's items (NULL: never expires) and
the partial index the expiry sweep deletes through (only the rows that expire; built on
PostgreSQL only, like the table's other indexes: PgMemory refuses other vendors).

Existing rows get NULL: nothing expires until written with a ttl.
"""

from django.db import migrations, models

import tulip_memory.postgres.operations


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0009_erasure"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryitem",
            name="expires_at",
            field=models.DateTimeField(
                blank=True, help_text="When the item expires (empty: never)", null=True
            ),
        ),
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddIndex(
                model_name="memoryitem",
                index=models.Index(
                    condition=models.Q(("expires_at__isnull", False)),
                    fields=["tenant", "expires_at"],
                    name="tulip_store_item_expiry",
                ),
            )
        ),
    ]
