"""The two database roles of a tulip_memory database, and the idempotent SQL that sets them up.

The owner migrates and owns the tables; the application role gets DML and cannot bypass
row-level security (docs/design/tenancy.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "APP_ROLE",
    "OWNER_ROLE",
    "SchemaObjects",
    "citus_role_sql",
    "database_setup_sql",
    "ownership_conflict",
    "role_sql",
    "schema_objects",
    "validate_identifier",
]

OWNER_ROLE = "tulip_owner"
APP_ROLE = "tulip_app"
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def validate_identifier(name: str) -> str:
    """``name`` if it is a plain lower-case SQL identifier, else ``ValueError``."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a plain lower-case SQL identifier")
    return name


def role_sql(role: str, *, exists: bool, password: str | None = None) -> list[Any]:
    """The statements making ``role`` a login role without superuser, BYPASSRLS, CREATEDB or
    CREATEROLE (none when it exists and no ``password`` is given)."""
    from psycopg import sql

    name = sql.Identifier(validate_identifier(role))
    secret = sql.SQL("") if password is None else sql.SQL(" PASSWORD {}").format(password)
    if exists:
        return [] if password is None else [sql.SQL("ALTER ROLE {}{}").format(name, secret)]
    return [
        sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE{}").format(
            name, secret
        )
    ]


def database_setup_sql(
    dbname: str,
    *,
    owner: str,
    app: str,
    app_can_truncate: bool = False,
    tables: Sequence[str] = (),
    sequences: Sequence[str] = (),
) -> list[Any]:
    """What a superuser runs inside ``dbname``: the extensions, ``public`` owned by ``owner``,
    and the app role's DML on what ``owner`` creates and already owns (TRUNCATE with
    ``app_can_truncate``)."""
    from psycopg import sql

    db, owner_id, app_id = (sql.Identifier(validate_identifier(n)) for n in (dbname, owner, app))
    privileges = "SELECT, INSERT, UPDATE, DELETE" + (", TRUNCATE" if app_can_truncate else "")
    existing = []
    if tables:
        existing.append(
            sql.SQL("GRANT " + privileges + " ON TABLE {} TO {}").format(
                sql.SQL(", ").join(sql.Identifier("public", t) for t in tables), app_id
            )
        )
    if sequences:
        existing.append(
            sql.SQL("GRANT USAGE, SELECT ON SEQUENCE {} TO {}").format(
                sql.SQL(", ").join(sql.Identifier("public", q) for q in sequences), app_id
            )
        )
    return [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
        # Trusted, but the owner role may not have CREATE on a database it does not own.
        sql.SQL("CREATE EXTENSION IF NOT EXISTS btree_gin"),
        sql.SQL("ALTER SCHEMA public OWNER TO {}").format(owner_id),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, owner_id),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, app_id),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(app_id),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public GRANT "
            + privileges
            + " ON TABLES TO {}"
        ).format(owner_id, app_id),
        sql.SQL(
            "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public "
            "GRANT USAGE, SELECT ON SEQUENCES TO {}"
        ).format(owner_id, app_id),
        *existing,
    ]


def citus_role_sql(*roles: str) -> list[Any]:
    """On a Citus coordinator (which propagates it to the workers): a ``SET LOCAL`` of
    ``roles`` reaches the workers their transaction uses, as the tenant pin needs
    (:func:`tulip_memory.tenancy.context.tenant_atomic`); Citus' default sends no ``SET``."""
    from psycopg import sql

    return [
        sql.SQL("ALTER ROLE {} SET citus.propagate_set_commands = 'local'").format(
            sql.Identifier(validate_identifier(role))
        )
        for role in roles
    ]


# An extension's own relations (PostGIS' spatial_ref_sys) belong to it, not the project.
_SCHEMA_OBJECTS_SQL = """
SELECT c.relname, c.relkind = 'S', r.rolname, r.rolsuper OR r.rolbypassrls
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
JOIN pg_roles r ON r.oid = c.relowner
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
  AND NOT EXISTS (
    SELECT 1 FROM pg_depend d
    WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  )
ORDER BY c.relname
"""


@dataclass(frozen=True)
class SchemaObjects:
    """What schema ``public`` already holds (:func:`schema_objects`)."""

    #: The owner role's tables (and views, materialized views, foreign tables).
    tables: tuple[str, ...] = ()
    #: The owner role's sequences.
    sequences: tuple[str, ...] = ()
    #: The tables of every other role, by role.
    foreign: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Those other roles that are superusers or have BYPASSRLS.
    privileged: frozenset[str] = frozenset()


def schema_objects(cursor: Any, owner: str) -> SchemaObjects:
    """The relations of schema ``public`` by owner, extensions' own left out."""
    cursor.execute(_SCHEMA_OBJECTS_SQL)
    tables: list[str] = []
    sequences: list[str] = []
    foreign: dict[str, list[str]] = {}
    privileged: set[str] = set()
    for name, is_sequence, role, bypasses in cursor.fetchall():
        if role == owner:
            (sequences if is_sequence else tables).append(name)
        elif not is_sequence:
            foreign.setdefault(role, []).append(name)
            if bypasses:
                privileged.add(role)
    return SchemaObjects(
        tables=tuple(tables),
        sequences=tuple(sequences),
        foreign={role: tuple(names) for role, names in foreign.items()},
        privileged=frozenset(privileged),
    )


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _some(names: Sequence[str], shown: int = 5) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def ownership_conflict(
    objects: SchemaObjects, *, owner: str, app: str, dbname: str, owner_exists: bool = True
) -> str | None:
    """None when only ``owner`` owns tables in ``public``; else what is wrong and what to do,
    said before anything changes (such tables would stop the first migration)."""
    if not objects.foreign:
        return None
    counted = "; ".join(
        f"{role!r} owns {len(names)} ({_some(names)})" for role, names in objects.foreign.items()
    )
    create = (
        ""
        if owner_exists
        else f'CREATE ROLE "{owner}" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE; '
    )
    advice = []
    for role, names in objects.foreign.items():
        if role in objects.privileged or role == app:
            why = "the application role" if role == app else "a superuser or a role with BYPASSRLS"
            statements = create + " ".join(
                f'ALTER TABLE {_quoted(name)} OWNER TO "{owner}";' for name in names
            )
            advice.append(
                f"{role!r}: {role!r} is {why}, so it cannot be the owner role: as a superuser "
                f"in database {dbname!r}, give its tables to {owner!r}: {statements}"
            )
        else:
            advice.append(
                f"{role!r}: either name it as the owner role (--owner-role {role}), or, as a "
                f"superuser in database {dbname!r}, give everything it owns there to "
                f'{owner!r}: {create}REASSIGN OWNED BY "{role}" TO "{owner}";'
            )
        create = ""  # the missing owner role is created once
    return (
        f"Schema public of database {dbname!r} already has tables of another role than the "
        f"owner role {owner!r}: {counted}. {owner!r} could not migrate them (permission "
        "denied, at django_migrations when it is among them) and the application role "
        f"would get no right on them, so nothing was changed. For {'; for '.join(advice)}. "
        "Then run this command again."
    )
