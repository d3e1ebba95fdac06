"""The trigger function registering a tenant when its rows are first inserted into a tenant
table (PostgreSQL): ``SECURITY DEFINER``, so the application role needs no right on the
registry, its search path pinned and every name schema-qualified; and the migration
operations that create (``0008``) and pin (``0016``) it.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.postgres.operations import DatabaseOnlyTableOperation, schema_and_table

__all__ = ["FUNCTION", "AddTenantRegistration", "PinTenantRegistration", "function_sql"]

FUNCTION = "tulip_memory_register_tenants"


def function_sql(schema: str, table: str, *, replace: bool = False) -> str:
    """The function in ``schema``, registering into ``table`` (both quoted); ``replace``:
    ``CREATE OR REPLACE``. ``new_rows``, the transition table, no schema object can shadow."""
    create = "CREATE OR REPLACE FUNCTION" if replace else "CREATE FUNCTION"
    return f"""{create} {schema}.{FUNCTION}() RETURNS pg_catalog.trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
BEGIN
    INSERT INTO {table} (name, registered_at)
    SELECT DISTINCT n.tenant, pg_catalog.now() FROM new_rows AS n
    ON CONFLICT (name) DO NOTHING;
    RETURN NULL;
END
$body$"""


class AddTenantRegistration(DatabaseOnlyTableOperation):
    """The function, registering into ``model_name``'s table, ``EXECUTE`` revoked from
    PUBLIC (triggers run it anyway). Reversing drops it and its triggers."""

    description = f"Add {FUNCTION}, registering tenants in {{model_name}}"
    name_fragment = "tenant_registration"

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(function_sql(schema, table), params=None)
        schema_editor.execute(
            f"REVOKE ALL ON FUNCTION {schema}.{FUNCTION}() FROM PUBLIC", params=None
        )

    def backwards(self, schema_editor: Any, model: Any) -> None:
        schema, _table = schema_and_table(schema_editor, model)
        schema_editor.execute(f"DROP FUNCTION {schema}.{FUNCTION}()", params=None)


class PinTenantRegistration(DatabaseOnlyTableOperation):
    """The function replaced by :func:`function_sql`'s (owner, grants and triggers kept).
    Reversing keeps the pinned body: the one before let a caller's objects run as owner."""

    description = f"Pin the search path of {FUNCTION}, registering tenants in {{model_name}}"
    name_fragment = "pin_tenant_registration"

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(function_sql(schema, table, replace=True), params=None)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        """Nothing: the pinned body stays (see the class)."""
