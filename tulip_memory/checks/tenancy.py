"""System checks of tenant isolation: row-level security on the tenant databases a run
names (E010-E014, E017, E019, W010, I010; E015 when one cannot be reached) and the tenant
resolver (E016, W011).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.checks.settings import tenant_setting, vector_dimensions
from tulip_memory.conf import tenant_databases
from tulip_memory.postgres.rls import POLICY_NAME, tenant_tables
from tulip_memory.postgres.search_index import LEXICAL_FUNCTION, OWNER_READ_POLICY, vector_width_sql

__all__ = [
    "PINNED_SEARCH_PATH",
    "check_connection",
    "check_database_connections",
    "check_default_tenant_database",
    "check_tenant_databases",
    "check_tenant_resolver",
    "check_tenant_resolver_setting",
    "connection_problem",
    "postgres_connections",
    "search_path_of",
    "settings_read",
    "tenant_connections",
]

# The search path of every SECURITY DEFINER function of the tables' owner: the catalog
# first, then the temporary schema, whose objects are then never found before the
# catalog's (nor, for functions and operators, at all).
PINNED_SEARCH_PATH = ["pg_catalog", "pg_temp"]


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


def postgres_connections(aliases: Iterable[str]) -> Iterator[tuple[str, Any, str | None]]:
    """``(alias, connection, why it cannot be reached or None)`` of each PostgreSQL alias."""
    from django.db import connections

    for alias in aliases:
        connection = connections[alias]
        if connection.vendor == "postgresql":
            yield alias, connection, connection_problem(connection)


def tenant_connections(databases: Iterable[str] | None) -> Iterator[tuple[str, Any, str | None]]:
    """:func:`postgres_connections` of the ``TENANT_DATABASES`` aliases a run names (``check
    --database``); none while that setting is of the wrong type (E003)."""
    aliases = tenant_databases()
    if not databases or aliases is None:
        return iter(())
    named = set(databases)
    return postgres_connections(alias for alias in dict.fromkeys(aliases) if alias in named)


@registered(checks.Tags.database)
def check_database_connections(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E015: a PostgreSQL alias named (``check --database``) cannot be reached, so the
    database checks of tulip_memory could not look at it."""
    return [
        finding(
            "E015",
            f"Database alias {alias!r} cannot be reached ({problem}): its row-level "
            "security, vector width, stored vectors and text search configuration "
            "were not checked.",
            f"Check settings.DATABASES[{alias!r}] and that the server answers, "
            "then run the check again.",
        )
        for alias, _connection, problem in postgres_connections(databases or ())
        if problem is not None
    ]


def check_connection(connection: Any, alias: str) -> list[checks.CheckMessage]:
    """Row-level security problems seen through ``connection`` (of database ``alias``)."""
    from tulip_memory.models.store import MemoryItem

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
            # The owner's read policy of the store item table (tulip_memory.postgres.search_index)
            # is expected there, and only as created: SELECT, permissive, to the owner
            # alone, USING (true).
            "coalesce(array_agg(p.polname ORDER BY p.polname) "
            "FILTER (WHERE p.polname IS NOT NULL AND NOT (c.relname = %s "
            "AND p.polname = %s AND p.polcmd = 'r' AND p.polpermissive "
            "AND p.polroles = ARRAY[c.relowner] AND pg_get_expr(p.polqual, p.polrelid) = 'true' "
            "AND p.polwithcheck IS NULL)), '{}'), "
            # The expressions of tulip_memory's own policy, as pg_policies shows them
            # (its qual and with_check columns). pg_get_expr opens the table (ACCESS
            # SHARE): the check waits for a migration that holds it exclusively.
            "max(pg_get_expr(p.polqual, p.polrelid)) FILTER (WHERE p.polname = %s), "
            "max(pg_get_expr(p.polwithcheck, p.polrelid)) FILTER (WHERE p.polname = %s) "
            "FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid "
            "WHERE c.relname = ANY(%s) AND c.relkind = 'r' AND pg_table_is_visible(c.oid) "
            "GROUP BY c.oid, c.relname, c.relrowsecurity, c.relforcerowsecurity, c.relowner",
            [MemoryItem._meta.db_table, OWNER_READ_POLICY, POLICY_NAME, POLICY_NAME, tables],
        )
        rows = cursor.fetchall()
        # The lexical search function applies the tenant policy's predicate itself.
        cursor.execute(
            "SELECT prosrc FROM pg_proc WHERE proname = %s AND pg_function_is_visible(oid)",
            [LEXICAL_FUNCTION],
        )
        functions = [source for (source,) in cursor.fetchall()]
        # The SECURITY DEFINER functions of the tenant tables' owner, in any schema.
        cursor.execute(
            "SELECT p.oid::regprocedure::text, pg_get_userbyid(p.proowner), p.proconfig "
            "FROM pg_proc p WHERE p.prosecdef AND p.proowner IN (SELECT c.relowner "
            "FROM pg_class c WHERE c.relname = ANY(%s) AND c.relkind = 'r' "
            "AND pg_table_is_visible(c.oid)) ORDER BY 1",
            [tables],
        )
        definers = cursor.fetchall()
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
            finding(
                "E010",
                f"Database alias {alias!r} connects as {role!r}, a superuser: row-level "
                "security does not apply to it, so tenants are not isolated.",
                "Connect the application as a role without SUPERUSER "
                "(see docs/pg_store.md, 'Two roles').",
            )
        )
    if bypassrls and not superuser:  # a superuser's E010 says it all: NOBYPASSRLS is not enough
        errors.append(
            finding(
                "E011",
                f"Database alias {alias!r} connects as {role!r}, which has BYPASSRLS: "
                "tenants are not isolated.",
                f"ALTER ROLE {role} NOBYPASSRLS",
            )
        )
    owned_tables = sorted(table for table, _enabled, _forced, owned, *_rest in rows if owned)
    if owned_tables:
        errors.append(
            finding(
                "W010",
                f"Database alias {alias!r} connects as {role!r}, the owner of the tenant "
                f"tables {owned_tables}: an owner can disable row level security.",
                "Run migrations as an owner role (migrate --database=owner) and "
                "the application as another role.",
            )
        )
    for table, enabled, forced, _owned, policies, *_expressions in rows:
        if not (enabled and forced):
            errors.append(
                finding(
                    "E012",
                    f"Tenant table {table!r} does not ENABLE and FORCE row level security.",
                    f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY, "
                    f"FORCE ROW LEVEL SECURITY (or migrate tulip_memory)",
                )
            )
        if list(policies) != [POLICY_NAME]:
            errors.append(
                finding(
                    "E013",
                    f"Tenant table {table!r} has the policies {list(policies)}, expected "
                    f"exactly [{POLICY_NAME!r}]: another policy would widen what a tenant sees.",
                    "Drop the extra policies, or migrate tulip_memory to recreate its own.",
                )
            )
    # (table, qual, with_check) of each tenant table that has tulip_memory's policy.
    expressions = [(row[0], row[5], row[6]) for row in rows if POLICY_NAME in row[4]]
    errors.extend(_policy_setting_errors(expressions))
    errors.extend(_function_setting_errors(functions))
    errors.extend(_search_path_errors(definers))
    return errors


def search_path_of(config: list[str] | None) -> list[str] | None:
    """The schemas of the ``search_path`` a function sets (``config``: its
    ``pg_proc.proconfig``), as PostgreSQL resolves the names (a quoted one as written,
    another lowercased); None when it sets none (it runs with its caller's)."""
    for entry in config or ():
        name, _, value = entry.partition("=")
        if name.strip().lower() == "search_path":
            return [_schema_name(part.strip()) for part in value.split(",")]
    return None


def _schema_name(written: str) -> str:
    if len(written) >= 2 and written[0] == written[-1] == '"':
        return written[1:-1].replace('""', '"')
    return written.lower()


def _search_path_errors(
    definers: list[tuple[str, str, list[str] | None]],
) -> list[checks.CheckMessage]:
    """E017: a ``SECURITY DEFINER`` function of the tables' owner whose search path is not
    :data:`PINNED_SEARCH_PATH`; ``definers``: (signature, owner, proconfig)."""
    errors: list[checks.CheckMessage] = []
    for signature, owner, config in definers:
        schemas = search_path_of(config)
        if schemas == PINNED_SEARCH_PATH:
            continue
        runs_with = (
            "its caller's search path"
            if schemas is None
            else f"the search path {', '.join(schemas) or 'of no schema'}"
        )
        errors.append(
            finding(
                "E017",
                f"The SECURITY DEFINER function {signature} of {owner!r}, the tenant "
                f"tables' owner, runs with {runs_with}: a caller's temporary table, view or "
                "type can stand in for a name it uses and run the caller's code with the "
                "owner's rights (reading every tenant, lifting row level security).",
                f"ALTER FUNCTION {signature} SET search_path = pg_catalog, pg_temp, "
                "and name every table, function and operator of its body by schema. "
                "tulip_memory's own are pinned by its migration 0016 (manage.py migrate "
                "--database=owner).",
            )
        )
    return errors


# A setting a policy expression reads: current_setting('name'::text, ...), as pg_get_expr
# prints it (a quote inside the name doubled).
_READS_SETTING = re.compile(r"current_setting\(\s*'((?:[^']|'')*)'")


def settings_read(*expressions: str | None) -> list[str]:
    """The settings ``current_setting('...')`` reads in the policy ``expressions``
    (PostgreSQL's text of them), lowercased (setting names ignore case), sorted."""
    return sorted(
        {
            found.replace("''", "'").lower()
            for expression in expressions
            if expression
            for found in _READS_SETTING.findall(expression)
        }
    )


def _policy_setting_errors(
    policies: list[tuple[str, str | None, str | None]],
) -> list[checks.CheckMessage]:
    """E019: tulip_memory's policy does not read ``TENANT_SETTING`` alone, one error per
    setting(s) read, naming the tables; ``policies``: (table, qual, with_check)."""
    from tulip_memory.postgres.rls import TENANT_COLUMN, policy_expression

    setting = tenant_setting()
    if setting is None:
        return []  # not a setting name: E004
    tables_by_read: dict[tuple[str, ...], list[str]] = {}
    for table, qual, with_check in sorted(policies):
        read = tuple(settings_read(qual, with_check))
        if read != (setting.lower(),):
            tables_by_read.setdefault(read, []).append(table)
    expression = policy_expression(TENANT_COLUMN, setting)
    recreate = (
        f"for each table T: DROP POLICY {POLICY_NAME} ON T; CREATE POLICY {POLICY_NAME} ON T "
        f"USING ({expression}) WITH CHECK ({expression})"
    )
    errors: list[checks.CheckMessage] = []
    for read, tables in tables_by_read.items():
        what = f"read {', '.join(map(repr, read))}" if read else "read no setting"
        back = (
            f"Set TENANT_SETTING = {read[0]!r} (the setting the policies were created "
            "with), or recreate the policies as the table owner, "
            if len(read) == 1
            else "Recreate the policies as the table owner, "
        )
        errors.append(
            finding(
                "E019",
                f"The policies {POLICY_NAME!r} of the tenant tables {tables} {what}, but "
                f"TULIP_MEMORY['TENANT_SETTING'] is {setting!r}, the setting tenant_atomic "
                "pins the tenant in: they never see the pinned tenant (no tenant would see "
                "its rows nor write any), or compare rows with a value set elsewhere.",
                back + recreate,
            )
        )
    return errors


def _function_setting_errors(sources: list[str]) -> list[checks.CheckMessage]:
    """E019: the lexical search function (``sources``: its body, if it exists) does not
    read ``TENANT_SETTING`` alone."""
    setting = tenant_setting()
    if setting is None:
        return []  # not a setting name: E004
    errors: list[checks.CheckMessage] = []
    for source in sources:
        read = settings_read(source)
        if read == [setting.lower()]:
            continue
        what = f"reads {', '.join(map(repr, read))}" if read else "reads no setting"
        errors.append(
            finding(
                "E019",
                f"The search function {LEXICAL_FUNCTION!r} {what}, but "
                f"TULIP_MEMORY['TENANT_SETTING'] is {setting!r}: a search would never find "
                "a word of the pinned tenant's memories, or those of a tenant set elsewhere.",
                "Set TENANT_SETTING to the setting it reads, or recreate it as the "
                "owner: manage.py migrate tulip_memory 0013 --database=owner, then "
                "manage.py migrate --database=owner.",
            )
        )
    return errors


def _vector_width_errors(columns: list[tuple[str, str, int]]) -> list[checks.CheckMessage]:
    wanted = vector_dimensions()
    if wanted is None:
        return []  # not a width: E002
    return [
        finding(
            "E014",
            f"Column {table}.{column} is vector({width}), but "
            f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {wanted}: every write would fail.",
            f"Set VECTOR_DIMENSIONS = {width}, or as the owner, in one transaction: "
            + "; ".join(_width_statements(table, column, wanted))
            + "; then manage.py tulip_memory_reembed re-embeds every row.",
        )
        for table, column, width in columns
        if width > 0 and width != wanted
    ]


def _width_statements(table: str, column: str, width: int) -> list[str]:
    """What makes ``table.column`` ``vector(width)``: the store's own statements for its
    vector column (its generated codes depend on it), a plain ``ALTER`` otherwise."""
    from tulip_memory.models.store import MemoryItem

    if table == MemoryItem._meta.db_table and column == "embedding":
        return vector_width_sql(table, width)
    return [f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({width}) USING NULL"]


@registered()
def check_default_tenant_database(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Untagged: the row-level security checks on ``default`` in a run that names no alias
    (Django passes ``databases=None`` then, up to 6.0); a run that names aliases gets them
    from :func:`check_tenant_databases`, tagged ``database``, which Django runs then."""
    from django.db import DEFAULT_DB_ALIAS

    return check_tenant_databases(databases=[DEFAULT_DB_ALIAS]) if databases is None else []


@registered(checks.Tags.database)
def check_tenant_databases(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Tagged ``database``: the row-level security checks on the tenant aliases a run names
    (``check --database``, also under ``--tag database``)."""
    errors: list[checks.CheckMessage] = []
    for alias, connection, problem in tenant_connections(databases):
        if problem is None:
            errors.extend(check_connection(connection, alias))
            continue
        # An Info, not a Warning: commands run at build time without a database
        # (collectstatic in an image build) run these checks too.
        errors.append(
            finding(
                "I010",
                f"The row-level security of database {alias!r} was not checked: it cannot "
                f"be reached ({problem}).",
                f"Run manage.py check --database {alias} where the database answers.",
            )
        )
    return errors


@registered()
def check_tenant_resolver_setting(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E016: ``TENANT_RESOLVER`` cannot be imported, or is not callable."""
    from tulip_memory.conf import settings

    try:
        resolver = settings.import_setting("TENANT_RESOLVER")
    except ImportError as exc:
        problem = f"cannot be imported: {type(exc).__name__}: {exc}"
    else:
        if callable(resolver):
            return []
        problem = f"is not callable (it is {type(resolver).__name__})"
    return [
        finding(
            "E016",
            f"TULIP_MEMORY['TENANT_RESOLVER'] ({settings.TENANT_RESOLVER!r}) {problem}: "
            "TenantMiddleware would fail every request.",
            "Name a callable(request) -> str | None by dotted path, e.g. the default "
            "tulip_memory.middleware.resolve_tenant_from_membership.",
        )
    ]


@registered(checks.Tags.security, deploy=True)
def check_tenant_resolver(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """W011 (``check --deploy``): the tenant comes from a header any client can send."""
    from tulip_memory.conf import settings
    from tulip_memory.tenancy.middleware import resolve_tenant_from_header

    try:
        resolver = settings.import_setting("TENANT_RESOLVER")
    except ImportError:
        return []  # reported by E016 (check_tenant_resolver_setting)
    if resolver is not resolve_tenant_from_header:
        return []
    return [
        finding(
            "W011",
            f"TULIP_MEMORY['TENANT_RESOLVER'] takes the tenant from the "
            f"{settings.TENANT_HEADER!r} request header, which any client can send: a "
            "caller could read and write another tenant's memories.",
            "Keep it only behind a gateway that authenticates callers and sets (or "
            "strips) that header; otherwise use the default, "
            "tulip_memory.middleware.resolve_tenant_from_membership, or a resolver of "
            "request.user.",
        )
    ]
