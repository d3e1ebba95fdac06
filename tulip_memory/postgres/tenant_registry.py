"""The function that registers a tenant when a row of it is first inserted into any tenant
table (PostgreSQL), and the migration operations that create it and pin it.

Each tenant table has one statement-level ``AFTER INSERT`` trigger (over its transition
table ``new_rows``) that runs :data:`FUNCTION`: it inserts the statement's tenants into
the registry table, ``ON CONFLICT DO NOTHING``. The function is ``SECURITY DEFINER``,
owned by the migrating role (the tables' owner), so the application role needs no
privilege on the registry. Its search path is ``pg_catalog, pg_temp`` and its body names
the registry table (in the schema it was migrated in) and every function by schema: a
caller may create objects in its temporary schema, and none of them may ever stand in for
a name the function uses, which would run the caller's code with the owner's rights.

:class:`AddTenantRegistration` creates it (migration ``0008``); :class:`PinTenantRegistration`
replaces the body of a database migrated before it was pinned (migration ``0016``).
"""

from __future__ import annotations

from typing import Any

from tulip_memory.postgres.operations import DatabaseOnlyTableOperation, schema_and_table

__all__ = ["FUNCTION", "AddTenantRegistration", "PinTenantRegistration", "function_sql"]

FUNCTION = "tulip_memory_register_tenants"


def function_sql(schema: str, table: str, *, replace: bool = False) -> str:
    """The function in ``schema`` (quoted), registering into ``table`` (the registry's,
    schema-qualified and quoted); ``replace``: ``CREATE OR REPLACE`` (owner and grants
    kept). ``new_rows`` is the trigger's transition table, which no schema object can
    shadow."""
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
    """The function, registering into the table of ``model_name`` (the registry's), with
    ``EXECUTE`` revoked from PUBLIC (triggers run it whatever the inserting role may
    execute). Reversing drops it (its triggers first). PostgreSQL only."""

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(function_sql(schema, table), params=None)
        schema_editor.execute(
            f"REVOKE ALL ON FUNCTION {schema}.{FUNCTION}() FROM PUBLIC", params=None
        )

    def backwards(self, schema_editor: Any, model: Any) -> None:
        schema, _table = schema_and_table(schema_editor, model)
        schema_editor.execute(f"DROP FUNCTION {schema}.{FUNCTION}()", params=None)

    def describe(self) -> str:
        return f"Add {FUNCTION}, registering tenants in {self.model_name}"

    @property
    def migration_name_fragment(self) -> str:
        return "tenant_registration"


class PinTenantRegistration(DatabaseOnlyTableOperation):
    """The function replaced by :func:`function_sql`'s (``CREATE OR REPLACE``: its owner,
    grants and triggers kept), run by its owner, the migrating role. Reversing keeps the
    pinned body: the one before let a caller's temporary objects run as the owner.
    PostgreSQL only."""

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(function_sql(schema, table, replace=True), params=None)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        """Nothing: the pinned body stays (see the class)."""

    def describe(self) -> str:
        return f"Pin the search path of {FUNCTION}, registering tenants in {self.model_name}"

    @property
    def migration_name_fragment(self) -> str:
        return "pin_tenant_registration"
