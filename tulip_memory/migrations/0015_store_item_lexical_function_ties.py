"""PgMemory's lexical search function keeps every row tied with the last of its pool, so
that the search statement's tie-break (newest-updated first, then key) decides among
them, as the statement that reads every row does (tulip_memory.postgres.search_index).
PostgreSQL only.
"""

from django.db import migrations

import tulip_memory.postgres.search_index


class Migration(migrations.Migration):
    dependencies = [("tulip_memory", "0014_store_item_search_index")]

    operations = [tulip_memory.postgres.search_index.ReplaceLexicalFunction("memoryitem")]
