"""Migrations run as the role that owns the tables, never as the application role.

:func:`refuse_migrations_without_schema_rights` (a ``pre_migrate`` receiver) stops a
``migrate`` through a role that may not create in the schema, naming what to run instead.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

__all__ = ["refuse_migrations_without_schema_rights"]


def refuse_migrations_without_schema_rights(
    sender: Any, *, using: str, plan: list[Any] | None = None, **kwargs: Any
) -> None:
    """CommandError when there is something to migrate on PostgreSQL and ``using``'s role may
    not create in the current schema."""
    from django.db import connections

    connection = connections[using]
    if not plan or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, current_schema(), "
            "has_schema_privilege(current_user, current_schema(), 'CREATE')"
        )
        role, schema, can_create = cursor.fetchone()
    if can_create:
        return
    hint = _what_to_run_instead(connection, using, schema)
    raise CommandError(
        f"tulip_memory: the database role {role!r} of alias {using!r} may not create tables "
        f"in schema {schema!r}, so it cannot run migrations; {hint}. The application role "
        "runs under row-level security and must not own the tables. For a single-role "
        "development database, give that role the schema (ALTER SCHEMA "
        f"{schema} OWNER TO {role}) — never in production."
    )


def _same_database(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two aliases reach the same database (NAME, HOST and PORT)."""
    return all(
        str(other.get(key) or "") == str(one.get(key) or "") for key in ("NAME", "HOST", "PORT")
    )


def _what_to_run_instead(connection: Any, using: str, schema: str) -> str:
    """The other alias of this database (not a ``TENANT_DATABASES`` one) whose role may create
    in ``schema``; else the grant letting the first such alias; else the alias to add."""
    from django.db import connections

    from tulip_memory.conf import tenant_databases

    applications = set(tenant_databases() or ())
    mine = connections.settings[using]
    candidates: dict[str, str] = {}  # alias -> its role
    for alias, config in connections.settings.items():
        user = config.get("USER") or ""
        if (
            alias != using
            and alias not in applications
            and user
            and user != (mine.get("USER") or "")
            and _same_database(mine, config)
        ):
            candidates[alias] = user
    if not candidates:
        taken = connections.settings
        example = next((n for n in ("owner", "table_owner") if n not in taken), "tulip_owner")
        return (
            "add the table owner's role as another alias of the same database (for example "
            f"{example!r}) and run `manage.py migrate --database={example}`"
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) "
            "AND has_schema_privilege(oid, %s, 'CREATE')",
            [list(candidates.values()), schema],
        )
        may_create = {name for (name,) in cursor.fetchall()}
    for alias, role in candidates.items():
        if role in may_create:
            return f"run `manage.py migrate --database={alias}` (role {role!r})"
    alias, role = next(iter(candidates.items()))
    quoted_schema = connection.ops.quote_name(schema)
    quoted_role = connection.ops.quote_name(role)
    return (
        f"the alias {alias!r} of the same database connects as {role!r}, which may not "
        f"create in schema {schema!r} either (or does not exist): as a superuser run "
        f"`GRANT CREATE ON SCHEMA {quoted_schema} TO {quoted_role}` (or `manage.py "
        f"tulip_memory_setup_roles --owner-role {role}`, which gives it the schema), then "
        f"`manage.py migrate --database={alias}`"
    )
