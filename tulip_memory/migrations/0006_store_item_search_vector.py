"""The full-text side of PgMemory's hybrid ranking.

A ``tsvector`` of each item's search text, generated and stored by PostgreSQL with
``TULIP_MEMORY["TEXT_SEARCH_CONFIG"]`` (``english`` by default), and its length. No GIN
index: row-level security keeps the planner from using one for ``@@`` (see
``AddSearchVector``). PostgreSQL only; other vendors get nothing.
Changing the configuration later means migrating back to 0004 and forward again (the
column is recomputed for every row); tulip_memory.E061 reports a difference.
"""

from django.db import migrations

import tulip_memory.postgres.operations


class Migration(migrations.Migration):
    dependencies = [("tulip_memory", "0005_extraction_job_usage")]

    operations = [tulip_memory.postgres.operations.AddSearchVector("memoryitem")]
