"""The two database roles of a tulip_memory database, and the SQL that sets them up.

Row-level security binds neither a superuser nor the owner of a table, so a PostgreSQL
database of tulip_memory is used by two roles:

* the **owner** role (``tulip_owner`` by default) runs ``migrate --database=owner`` and
  owns the tables;
* the **application** role (``tulip_app``) runs the application: no superuser, no
  BYPASSRLS, not the owner, with DML rights on the owner's tables through default
  privileges.

``pgvector`` is not a trusted extension, so a superuser creates it (and ``btree_gin``,
trusted, which an owner role without CREATE on the database could not create). The statements here
are idempotent and are what ``manage.py tulip_memory_setup_roles`` runs (or prints with
``--dry-run``) and what :func:`tulip_memory.testing.postgres.bootstrap_database` runs on
an embedded or test server. Needs psycopg only.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "APP_ROLE",
    "OWNER_ROLE",
    "database_setup_sql",
    "role_sql",
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
    """The statements that make ``role`` a login role (none when it exists without a new
    ``password``): no superuser, no BYPASSRLS, cannot create databases or roles."""
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
    dbname: str, *, owner: str, app: str, app_can_truncate: bool = False
) -> list[Any]:
    """What a superuser runs inside ``dbname`` (idempotent): the vector and btree_gin
    extensions (the search index of migration 0014 needs the latter), the
    ``public`` schema owned by ``owner``, and the application role's rights on what
    ``owner`` creates there (DML only; TRUNCATE with ``app_can_truncate``)."""
    from psycopg import sql

    db, owner_id, app_id = (sql.Identifier(validate_identifier(n)) for n in (dbname, owner, app))
    privileges = "SELECT, INSERT, UPDATE, DELETE" + (", TRUNCATE" if app_can_truncate else "")
    return [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
        # Trusted, but the owner role may not have CREATE on a database it does not own.
        sql.SQL("CREATE EXTENSION IF NOT EXISTS btree_gin"),
        sql.SQL("ALTER SCHEMA public OWNER TO {}").format(owner_id),
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
    ]
