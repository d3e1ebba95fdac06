"""The indexes PgMemory's text search reads instead of a namespace's rows: each vector's
two-bit codes (a generated column) under a covering btree, a GIN index of the words, and
the ``SECURITY DEFINER`` function through which the application role reads the latter
(tulip_memory.postgres.search_index says why). PostgreSQL only; other vendors get nothing.
"""

from django.db import migrations

import tulip_memory.postgres.search_index


class Migration(migrations.Migration):
    dependencies = [("tulip_memory", "0013_extraction_job_failed_requests")]

    operations = [tulip_memory.postgres.search_index.AddSearchIndex("memoryitem")]
