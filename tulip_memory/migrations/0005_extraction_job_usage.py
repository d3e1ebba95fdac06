"""What a chat model cost each extraction job: the model and, summed over the job's
attempts, its calls and prompt/completion tokens (tulip_memory.manager.extraction.worker writes them).

Database defaults (``db_default``): the enqueue statement inserts jobs without naming
these columns, and rows enqueued by a process still running the previous release get 0.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tulip_memory", "0004_checkpoint_identifier_collation"),
    ]

    operations = [
        migrations.AddField(
            model_name="extractionjob",
            name="completion_tokens",
            field=models.PositiveBigIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name="extractionjob",
            name="llm_calls",
            field=models.PositiveIntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name="extractionjob",
            name="llm_model",
            field=models.CharField(
                blank=True,
                db_default="",
                help_text="Chat model of the last attempt",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="extractionjob",
            name="prompt_tokens",
            field=models.PositiveBigIntegerField(db_default=0),
        ),
    ]
