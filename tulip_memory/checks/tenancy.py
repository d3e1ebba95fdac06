"""System checks of tenant isolation (ids tulip_memory.E010-E016, W010, W011, I010).

On the aliases of ``TULIP_MEMORY["TENANT_DATABASES"]``: E010 superuser role, E011
BYPASSRLS role, E012 tenant table without ENABLE/FORCE row level security, E013 tenant
table whose policies are not exactly the expected one, E014 vector column narrower or
wider than ``VECTOR_DIMENSIONS``, W010 the role owns tenant tables. The policy itself is
created by :class:`tulip_memory.rls.EnableTenantRowLevelSecurity`.

They run in two ways. Tagged ``database``, on the aliases a command names (``check
--database A``, ``migrate --database A``). And, untagged, on the ``default`` alias when no
alias is named (plain ``check``, ``runserver``, any command's start-up checks) and it is
a PostgreSQL tenant database: three catalog queries on one connection. When that
connection cannot be opened (a build step without a database), plain ``check`` says so
with I010, an Info that fails no ``--fail-level`` in use; ``check --database A`` reports
E015 for a PostgreSQL alias named that cannot be reached (every check of tulip_memory
tagged ``database`` then skips it: :func:`connection_problem`).

E016 (always): ``TENANT_RESOLVER`` cannot be imported — TenantMiddleware would fail every
request. Tagged ``deploy`` (``check --deploy``): W011 the tenant resolver reads a request
header.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.rls import POLICY_NAME, tenant_tables

__all__ = [
    "check_connection",
    "check_database_connections",
    "check_default_tenant_database",
    "check_tenant_databases",
    "check_tenant_resolver",
    "check_tenant_resolver_setting",
    "connection_problem",
]


def connection_problem(connection: Any) -> str | None:
    """Why ``connection`` cannot be opened (the first line of the driver's error), or
    None when it can."""
    from django.db import OperationalError

    try:
        connection.ensure_connection()
    except OperationalError as exc:
        text = str(exc).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return None


def check_database_connections(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E015: a PostgreSQL alias named (``check --database``) cannot be reached, so the
    database checks of tulip_memory could not look at it."""
    from django.db import connections

    errors: list[checks.CheckMessage] = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            continue
        problem = connection_problem(connection)
        if problem is not None:
            errors.append(
                checks.Error(
                    f"Database alias {alias!r} cannot be reached ({problem}): its row-level "
                    "security, vector width, stored vectors and text search configuration "
                    "were not checked.",
                    hint=f"Check settings.DATABASES[{alias!r}] and that the server answers, "
                    "then run the check again.",
                    id="tulip_memory.E015",
                )
            )
    return errors


def _check_alias(alias: str) -> list[checks.CheckMessage]:
    from django.db import connections

    connection = connections[alias]
    if connection.vendor != "postgresql" or connection_problem(connection) is not None:
        return []  # an unreachable alias: E015
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


def check_default_tenant_database(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The row-level security checks on ``default`` when no alias was named.

    ``databases`` is ``None`` only when the caller named no database (Django's ``check``
    without ``--database``, the start-up checks of commands and ``runserver``); a list,
    even an empty one (``manage.py test`` without database tests), leaves the aliases to
    :func:`check_tenant_databases`.
    """
    from django.db import DEFAULT_DB_ALIAS, connections

    from tulip_memory.conf import settings

    if databases is not None or DEFAULT_DB_ALIAS not in settings.TENANT_DATABASES:
        return []
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        return []
    problem = connection_problem(connection)
    if problem is not None:
        # An Info, not a Warning: commands run at build time without a database
        # (collectstatic in an image build) run these checks too.
        return [
            checks.Info(
                f"The row-level security of database 'default' was not checked: it cannot "
                f"be reached ({problem}).",
                hint="Run manage.py check --database default where the database answers.",
                id="tulip_memory.I010",
            )
        ]
    return check_connection(connection, DEFAULT_DB_ALIAS)


def check_tenant_resolver_setting(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E016: ``TENANT_RESOLVER`` cannot be imported, or is not callable."""
    from tulip_memory.conf import settings

    hint = (
        "Name a callable(request) -> str | None by dotted path, e.g. the default "
        "tulip_memory.middleware.resolve_tenant_from_membership."
    )
    try:
        resolver = settings.import_setting("TENANT_RESOLVER")
    except ImportError as exc:
        problem = f"cannot be imported: {type(exc).__name__}: {exc}"
    else:
        if callable(resolver):
            return []
        problem = f"is not callable (it is {type(resolver).__name__})"
    return [
        checks.Error(
            f"TULIP_MEMORY['TENANT_RESOLVER'] ({settings.TENANT_RESOLVER!r}) {problem}: "
            "TenantMiddleware would fail every request.",
            hint=hint,
            id="tulip_memory.E016",
        )
    ]


def check_tenant_resolver(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W011 (``check --deploy``): the tenant comes from a header any client can send."""
    from tulip_memory.conf import settings
    from tulip_memory.middleware import resolve_tenant_from_header

    try:
        resolver = settings.import_setting("TENANT_RESOLVER")
    except ImportError:
        return []  # reported by E016 (check_tenant_resolver_setting)
    if resolver is not resolve_tenant_from_header:
        return []
    return [
        checks.Warning(
            f"TULIP_MEMORY['TENANT_RESOLVER'] takes the tenant from the "
            f"{settings.TENANT_HEADER!r} request header, which any client can send: a "
            "caller could read and write another tenant's memories.",
            hint="Keep it only behind a gateway that authenticates callers and sets (or "
            "strips) that header; otherwise use the default, "
            "tulip_memory.middleware.resolve_tenant_from_membership, or a resolver of "
            "request.user.",
            id="tulip_memory.W011",
        )
    ]
