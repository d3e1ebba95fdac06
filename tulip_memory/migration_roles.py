"""Migrations run as the role that owns the tables, never as the application role.

Under the documented two-role set-up (``docs/pg_store.md``) the application role may not
create, alter or drop tables: row-level security binds it, and it must not own what it is
bound by. A plain ``manage.py migrate`` on that role used to fail deep inside Django with
"permission denied for schema public". :func:`refuse_migrations_without_schema_rights`
(connected to ``pre_migrate`` in the app's ``ready()``) stops it first, with what to run
instead.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

__all__ = ["refuse_migrations_without_schema_rights"]


def refuse_migrations_without_schema_rights(
    sender: Any, *, using: str, plan: list[Any] | None = None, **kwargs: Any
) -> None:
    """``pre_migrate`` receiver: CommandError when ``using`` cannot run the pending plan.

    Only when there is something to migrate, on PostgreSQL, and the role may not create
    in the current schema (the owner role can; a single-role development database whose
    role owns the schema passes too).
    """
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
    owner_aliases = [
        alias
        for alias in connections.settings
        if alias != using
        and connections.settings[alias].get("NAME") == connections.settings[using].get("NAME")
    ]
    hint = (
        f"run `manage.py migrate --database={owner_aliases[0]}`"
        if owner_aliases
        else "add the table owner's role as another alias of the same database (for "
        "example 'owner') and run `manage.py migrate --database=owner`"
    )
    raise CommandError(
        f"tulip_memory: the database role {role!r} of alias {using!r} may not create tables "
        f"in schema {schema!r}, so it cannot run migrations; {hint}. The application role "
        "runs under row-level security and must not own the tables. For a single-role "
        "development database, give that role the schema (ALTER SCHEMA "
        f"{schema} OWNER TO {role}) — never in production."
    )
