"""Row-level security per tenant: migration operations and the tables the checks inspect.

Every tenant table has a ``tenant`` column and, on PostgreSQL, ENABLE + FORCE ROW LEVEL
SECURITY with one policy comparing it with the transaction's tenant setting; no setting
matches no row. django-rls gives the policy class and DDL templates, not its
session-scoped context helpers (docs/design/tenancy.md).
"""

from __future__ import annotations

from typing import Any

from tulip_memory.postgres.operations import DatabaseOnlyTableOperation

__all__ = [
    "POLICY_NAME",
    "TENANT_COLUMN",
    "EnableTenantRowLevelSecurity",
    "enable_tenant_row_level_security",
    "policy_expression",
    "tenant_tables",
]

POLICY_NAME = "tulip_tenant_isolation"
# Name of the tenant column; a model of tulip_memory with a field of this column is a
# tenant table (checked by tulip_memory.checks.tenancy).
TENANT_COLUMN = "tenant"


def policy_expression(
    column: str = TENANT_COLUMN,
    setting: str | None = None,
    *,
    qualified: bool = False,
    subquery: bool = True,
) -> str:
    """The tenant policy's predicate on ``column``: the setting read once per statement, and
    ``''`` (a transaction-local setting after its transaction) matching nothing.
    ``qualified`` names its function and operator by schema, for the body of a
    ``SECURITY DEFINER`` function (``NULLIF``'s ``=`` comes from its pinned search path).
    ``subquery=False``: the setting read without the sub-select that makes it once per
    statement, as Citus wants a policy of a distributed table."""
    from tulip_memory.conf import settings

    setting = setting or settings.TENANT_SETTING
    literal = "'" + setting.replace("'", "''") + "'"
    if not subquery:
        return f"\"{column}\" = NULLIF(current_setting({literal}, true), '')"
    if qualified:
        return (
            f'"{column}" OPERATOR(pg_catalog.=) '
            f"(SELECT NULLIF(pg_catalog.current_setting({literal}, true), ''))"
        )
    return f"\"{column}\" = (SELECT NULLIF(current_setting({literal}, true), ''))"


def _is_distributed(schema_editor: Any, table: str) -> bool:
    """Whether ``table`` (quoted) is a Citus distributed table: its policy holds no subquery."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return False
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition "
            "WHERE logicalrelid = %s::regclass AND partmethod = 'h')",
            [table],
        )
        return bool(cursor.fetchone()[0])


def _tenant_policy(column: str, *, distributed: bool = False) -> Any:
    from django_rls.policies import BasePolicy

    class TextTenantPolicy(BasePolicy):
        """django-rls policy comparing a text tenant column with the tenant setting."""

        def get_sql_expression(self) -> str:
            self.validate_field_name(column)
            return policy_expression(column, subquery=not distributed)

    return TextTenantPolicy(POLICY_NAME, operation=BasePolicy.ALL, roles="public")


def enable_tenant_row_level_security(
    schema_editor: Any, table: str, column: str = TENANT_COLUMN
) -> None:
    from django_rls.backends.postgresql.base import RLSDatabaseSchemaEditor as Ddl

    policy = _tenant_policy(column, distributed=_is_distributed(schema_editor, table))
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


class EnableTenantRowLevelSecurity(DatabaseOnlyTableOperation):
    """ENABLE + FORCE row level security on a model's table with the tenant policy;
    reversible, PostgreSQL only."""

    description = "Enable tenant row level security on {model_name} (PostgreSQL only)"
    name_fragment = "rls_{model_name}"

    def __init__(self, model_name: str, column: str = TENANT_COLUMN) -> None:
        super().__init__(model_name)
        self.column = column

    def forwards(self, schema_editor: Any, model: Any) -> None:
        table = schema_editor.quote_name(model._meta.db_table)
        enable_tenant_row_level_security(schema_editor, table, self.column)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        from django_rls.backends.postgresql.base import RLSDatabaseSchemaEditor as Ddl

        table = schema_editor.quote_name(model._meta.db_table)
        schema_editor.execute(
            Ddl.sql_drop_policy % {"name": schema_editor.quote_name(POLICY_NAME), "table": table}
        )
        schema_editor.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
        schema_editor.execute(Ddl.sql_disable_rls % {"table": table})


def tenant_tables() -> list[str]:
    """Tables of tulip_memory's models that have a ``tenant`` column."""
    from django.apps import apps

    tables = []
    for model in apps.get_app_config("tulip_memory").get_models():
        columns = {field.column for field in model._meta.concrete_fields}
        if TENANT_COLUMN in columns and not model._meta.proxy:
            tables.append(model._meta.db_table)
    return sorted(set(tables))
