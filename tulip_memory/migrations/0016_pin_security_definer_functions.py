"""Every ``SECURITY DEFINER`` function of the migrations pinned, in a database migrated
before: the tenant registry's (``0008``, whose search path was the migrating session's,
``"$user", public``, with the temporary schema searched first) and PgMemory's lexical
search function (``0014``), both replaced with bodies whose search path is ``pg_catalog,
pg_temp`` and which name every table, function and operator by schema
(:mod:`tulip_memory.postgres.tenant_registry`, :mod:`tulip_memory.postgres.search_index`). ``CREATE OR
REPLACE``: owners, grants and triggers kept. Reversing keeps the pinned bodies.
PostgreSQL only; other vendors get nothing.
"""

from django.db import migrations

import tulip_memory.postgres.search_index
import tulip_memory.postgres.tenant_registry


class Migration(migrations.Migration):
    dependencies = [("tulip_memory", "0015_store_item_lexical_function_ties")]

    operations = [
        tulip_memory.postgres.tenant_registry.PinTenantRegistration("tenant"),
        tulip_memory.postgres.search_index.ReplaceLexicalFunction("memoryitem"),
    ]
