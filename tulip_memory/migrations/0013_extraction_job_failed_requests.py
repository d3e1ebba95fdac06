"""``llm_failed_requests`` on extraction jobs: the requests to the chat model that got no
answer (a timeout, a lost connection, an error status), summed over the job's attempts.
Existing jobs get 0: their failed requests were not counted.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0012_langgraph_rows"),
    ]

    operations = [
        migrations.AddField(
            model_name="extractionjob",
            name="llm_failed_requests",
            field=models.PositiveIntegerField(
                db_default=0,
                help_text="Requests to the chat model that got no answer (retried or not)",
            ),
        ),
    ]
