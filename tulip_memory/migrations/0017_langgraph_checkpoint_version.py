"""The LangGraph saver's row version as a column: ``version``, 1 for every stored row (one
``ADD COLUMN ... DEFAULT 1``: no rewrite), counted up by each write of the row. It replaces
the ``xmin`` system column, which Citus cannot plan on a distributed table. PostgreSQL
only: the table exists nowhere else.
"""

from django.db import migrations, models

import tulip_memory.postgres.operations


class Migration(migrations.Migration):
    dependencies = [("tulip_memory", "0016_pin_security_definer_functions")]

    operations = [
        tulip_memory.postgres.operations.PostgreSQLOnly(
            migrations.AddField(
                model_name="langgraphcheckpoint",
                name="version",
                field=models.BigIntegerField(
                    db_default=1, help_text="How many times the row was written: 1 when inserted"
                ),
            )
        ),
    ]
