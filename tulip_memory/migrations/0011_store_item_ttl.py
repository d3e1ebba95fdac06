"""``ttl`` on PgMemory's items: the ttl of an item's last write (NULL: none), so that a
read asking to refresh it (LangGraph's ``refresh_ttl``, through ``DjangoStore``) can set
the expiry anew. Existing rows get NULL: their expiry, if any, stays as it is.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0010_ttl_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryitem",
            name="ttl",
            field=models.DurationField(
                blank=True,
                help_text="The ttl of the last write (a read that refreshes it sets the expiry anew)",
                null=True,
            ),
        ),
    ]
