"""Row-level security per tenant: migration operations and system checks.

Every tenant table has a text ``tenant`` column and, on PostgreSQL, ENABLE + FORCE ROW
LEVEL SECURITY with exactly one policy, :data:`POLICY_NAME`, whose USING and WITH CHECK
clauses compare that column with the transaction's tenant setting
(``TULIP_MEMORY["TENANT_SETTING"]``, set by :func:`tulip_memory.tenancy.tenant_atomic`).
With no tenant set the setting is NULL or ``''``, which matches no row: nothing is
visible and every write is rejected.

django-rls is used for what fits: its policy class (name/operation/role validation and
the USING/WITH CHECK split) and its schema editor's DDL templates. Not used: its
``TenantPolicy`` (it compares ``<field>_id`` with an integer) and its context helpers
(session-scoped ``set_config(..., false)``, which outlive the request on a pooled
connection).

The migration operation :class:`EnableTenantRowLevelSecurity` (usable by every layer's
migration) enables + forces RLS and creates the policy; it is a no-op on other vendors,
so ``migrate`` works on MariaDB and SQLite. The other PostgreSQL-only operations (vector
extension, ANN index, ``PostgreSQLOnly``) are in :mod:`tulip_memory.postgresql_operations`.

System checks (``database`` tag, run by ``check --database`` and ``migrate``) on the
aliases of ``TULIP_MEMORY["TENANT_DATABASES"]``: E010 superuser role, E011 BYPASSRLS
role, E012 tenant table without ENABLE/FORCE row level security, E013 tenant table whose
policies are not exactly the expected one, E014 vector column narrower or wider than
``VECTOR_DIMENSIONS``, W010 the role owns tenant tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks
from django.db.migrations.operations.base import Operation

from tulip_memory.postgresql_operations import is_postgresql

__all__ = [
    "POLICY_NAME",
    "TENANT_COLUMN",
    "EnableTenantRowLevelSecurity",
    "check_tenant_databases",
    "policy_expression",
    "tenant_tables",
]

POLICY_NAME = "tulip_tenant_isolation"
# Name of the tenant column; a model of tulip_memory with a field of this column is a
# tenant table (checked by the system checks below).
TENANT_COLUMN = "tenant"


def policy_expression(column: str = TENANT_COLUMN, setting: str | None = None) -> str:
    """The SQL predicate of the tenant policy on ``column``.

    ``current_setting`` is read in a scalar subquery (evaluated once per statement) and
    ``''`` — what a transaction-local setting reads as after its transaction ended — is
    turned into NULL, so that neither matches any row.
    """
    from tulip_memory.conf import settings

    setting = setting or settings.TENANT_SETTING
    literal = "'" + setting.replace("'", "''") + "'"
    return f"\"{column}\" = (SELECT NULLIF(current_setting({literal}, true), ''))"


def _tenant_policy(column: str) -> Any:
    from django_rls.policies import BasePolicy

    class TextTenantPolicy(BasePolicy):
        """django-rls policy comparing a text tenant column with the tenant setting."""

        def get_sql_expression(self) -> str:
            self.validate_field_name(column)
            return policy_expression(column)

    return TextTenantPolicy(POLICY_NAME, operation=BasePolicy.ALL, roles="public")


class EnableTenantRowLevelSecurity(Operation):
    """ENABLE + FORCE row level security on a model's table, with the tenant policy.

    Reversible (drops the policy, NO FORCE, DISABLE). PostgreSQL only.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, model_name: str, column: str = TENANT_COLUMN) -> None:
        self.model_name = model_name
        self.column = column

    def state_forwards(self, app_label: str, state: Any) -> None:
        return None

    def _table(self, app_label: str, state: Any, schema_editor: Any) -> str:
        model = state.apps.get_model(app_label, self.model_name)
        return schema_editor.quote_name(model._meta.db_table)

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not is_postgresql(schema_editor):
            return
        from django_rls.backends.postgresql.base import RLSDatabaseSchemaEditor as Ddl

        table = self._table(app_label, to_state, schema_editor)
        policy = _tenant_policy(self.column)
        expression = policy.get_using_expression()
        schema_editor.execute(Ddl.sql_enable_rls % {"table": table})
        schema_editor.execute(Ddl.sql_force_rls % {"table": table})
        schema_editor.execute(
            Ddl.sql_drop_policy % {"name": schema_editor.quote_name(policy.name), "table": table}
        )
        schema_editor.execute(
            Ddl.sql_create_policy
            % {
                "name": schema_editor.quote_name(policy.name),
                "table": table,
                "permissive": "PERMISSIVE",
                "operation": policy.operation,
                "roles": policy.roles,
                "using_clause": f"USING ({expression})",
                "check_clause": f"WITH CHECK ({policy.get_check_expression()})",
            }
        )

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        if not is_postgresql(schema_editor):
            return
        from django_rls.backends.postgresql.base import RLSDatabaseSchemaEditor as Ddl

        table = self._table(app_label, from_state, schema_editor)
        schema_editor.execute(
            Ddl.sql_drop_policy % {"name": schema_editor.quote_name(POLICY_NAME), "table": table}
        )
        schema_editor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        schema_editor.execute(Ddl.sql_disable_rls % {"table": table})

    def describe(self) -> str:
        return f"Enable tenant row level security on {self.model_name} (PostgreSQL only)"

    @property
    def migration_name_fragment(self) -> str:
        return f"rls_{self.model_name.lower()}"


# --- system checks -------------------------------------------------------------------


def tenant_tables() -> list[str]:
    """Tables of tulip_memory's models that have a ``tenant`` column."""
    from django.apps import apps

    tables = []
    for model in apps.get_app_config("tulip_memory").get_models():
        columns = {field.column for field in model._meta.concrete_fields}
        if TENANT_COLUMN in columns and not model._meta.proxy:
            tables.append(model._meta.db_table)
    return sorted(set(tables))


def _check_alias(alias: str) -> list[checks.CheckMessage]:
    from django.db import connections

    connection = connections[alias]
    if connection.vendor != "postgresql":
        return []
    return check_connection(connection, alias)


def check_connection(connection: Any, alias: str) -> list[checks.CheckMessage]:
    """Row-level security problems seen through ``connection`` (of database ``alias``)."""
    tables = tenant_tables()
    errors: list[checks.CheckMessage] = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        role, superuser, bypassrls = cursor.fetchone()
        cursor.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "pg_get_userbyid(c.relowner) = current_user, "
            "coalesce(array_agg(p.polname ORDER BY p.polname) "
            "FILTER (WHERE p.polname IS NOT NULL), '{}') "
            "FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid "
            "WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND pg_table_is_visible(c.oid) "
            "GROUP BY c.oid, c.relname, c.relrowsecurity, c.relforcerowsecurity, c.relowner",
            [tables],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT c.relname, a.attname, a.atttypmod FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE t.typname = 'vector' AND c.relname = ANY(%s) AND NOT a.attisdropped "
            "AND pg_table_is_visible(c.oid)",
            [tables],
        )
        vector_columns = cursor.fetchall()
    errors.extend(_vector_width_errors(vector_columns))
    if superuser:
        errors.append(
            checks.Error(
                f"Database alias {alias!r} connects as {role!r}, a superuser: row-level "
                "security does not apply to it, so tenants are not isolated.",
                hint="Connect the application as a role without SUPERUSER "
                "(see docs/pg_store.md, 'Two roles').",
                id="tulip_memory.E010",
            )
        )
    if bypassrls:
        errors.append(
            checks.Error(
                f"Database alias {alias!r} connects as {role!r}, which has BYPASSRLS: "
                "tenants are not isolated.",
                hint=f"ALTER ROLE {role} NOBYPASSRLS",
                id="tulip_memory.E011",
            )
        )
    owned_tables = sorted(table for table, _enabled, _forced, owned, _policies in rows if owned)
    if owned_tables:
        errors.append(
            checks.Warning(
                f"Database alias {alias!r} connects as {role!r}, the owner of the tenant "
                f"tables {owned_tables}: an owner can disable row level security.",
                hint="Run migrations as an owner role (migrate --database=owner) and "
                "the application as another role.",
                id="tulip_memory.W010",
            )
        )
    for table, enabled, forced, _owned, policies in rows:
        if not (enabled and forced):
            errors.append(
                checks.Error(
                    f"Tenant table {table!r} does not ENABLE and FORCE row level security.",
                    hint=f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY, "
                    f"FORCE ROW LEVEL SECURITY (or migrate tulip_memory)",
                    id="tulip_memory.E012",
                )
            )
        if list(policies) != [POLICY_NAME]:
            errors.append(
                checks.Error(
                    f"Tenant table {table!r} has the policies {list(policies)}, expected "
                    f"exactly [{POLICY_NAME!r}]: another policy would widen what a tenant sees.",
                    hint="Drop the extra policies, or migrate tulip_memory to recreate its own.",
                    id="tulip_memory.E013",
                )
            )
    return errors


def _vector_width_errors(columns: list[tuple[str, str, int]]) -> list[checks.CheckMessage]:
    from tulip_memory.conf import settings

    wanted = int(settings.VECTOR_DIMENSIONS)
    return [
        checks.Error(
            f"Column {table}.{column} is vector({width}), but "
            f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {wanted}: every write would fail.",
            hint=f"Set VECTOR_DIMENSIONS = {width}, or (as the owner) ALTER TABLE {table} "
            f"ALTER COLUMN {column} TYPE vector({wanted}) after clearing the column.",
            id="tulip_memory.E014",
        )
        for table, column, width in columns
        if width > 0 and width != wanted
    ]


def check_tenant_databases(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The row-level security checks, for the aliases of ``TENANT_DATABASES`` asked for."""
    from tulip_memory.conf import settings

    if not databases:
        return []
    wanted = [alias for alias in settings.TENANT_DATABASES if alias in set(databases)]
    errors: list[checks.CheckMessage] = []
    for alias in wanted:
        errors.extend(_check_alias(alias))
    return errors
