"""``llm_failed_requests`` on extraction jobs: the requests to the chat model that got no
answer (a timeout, a lost connection, an error status), summed over the job's attempts.
Existing jobs get 0: their failed requests were not counted. The chat model's columns get
names the admin can show ("chat model calls" rather than "Llm calls"), and ``error`` says
that it is the last attempt's (it stays when a retry succeeds).
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
                verbose_name="failed chat model requests",
            ),
        ),
        migrations.AlterField(
            model_name="extractionjob",
            name="error",
            field=models.TextField(
                blank=True,
                default="",
                help_text="Of the last failed attempt; kept when a retry succeeds",
                verbose_name="last error",
            ),
        ),
        migrations.AlterField(
            model_name="extractionjob",
            name="llm_calls",
            field=models.PositiveIntegerField(db_default=0, verbose_name="chat model calls"),
        ),
        migrations.AlterField(
            model_name="extractionjob",
            name="llm_model",
            field=models.CharField(
                blank=True,
                db_default="",
                help_text="Chat model of the last attempt",
                max_length=200,
                verbose_name="chat model",
            ),
        ),
    ]
