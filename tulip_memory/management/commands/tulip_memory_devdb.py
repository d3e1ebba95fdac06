"""``manage.py tulip_memory_devdb start|stop|status``: the project's development database, an
embedded PostgreSQL 18 + pgvector in ``<BASE_DIR>/.tulip-pg`` (tulip_memory.postgres.devserver).

It runs before ``DATABASES`` points at that server: no system checks, no connection
through Django; ``start`` prints the two ``DATABASES`` entries to paste.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.postgres.devserver import (
    DEV_DATABASE,
    DEV_DIRECTORY,
    DevServer,
    dev_server,
    server_databases,
    start_dev_server,
    stop_dev_server,
)
from tulip_memory.postgres.roles import APP_ROLE, OWNER_ROLE


class Command(BaseCommand):
    help = (
        "Start, stop or show the project's development database: an embedded PostgreSQL 18 "
        f"+ pgvector in BASE_DIR/{DEV_DIRECTORY}, with the database {DEV_DATABASE!r} and its "
        f"owner ({OWNER_ROLE}) and application ({APP_ROLE}) roles. Start is idempotent and "
        "prints the DATABASES entries; stop keeps the data."
    )
    # The settings' DATABASES may point at a server this command has not started yet.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("start", "stop", "status"))
        parser.add_argument(
            "--dir",
            type=Path,
            help=f"The data directory (default: BASE_DIR/{DEV_DIRECTORY} of the settings).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        pgdata = options["dir"] or self._default_directory()
        try:
            if options["action"] == "start":
                self._start(pgdata)
            elif options["action"] == "stop":
                self._stop(pgdata)
            else:
                self._status(dev_server(pgdata))
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from None

    @staticmethod
    def _default_directory() -> Path:
        base_dir = getattr(settings, "BASE_DIR", None)
        if base_dir is None:
            raise CommandError(
                "The settings have no BASE_DIR (django-admin startproject defines it): "
                "name the data directory with --dir."
            )
        return Path(base_dir) / DEV_DIRECTORY

    def _start(self, pgdata: Path) -> None:
        was_running = dev_server(pgdata).running
        server = start_dev_server(pgdata)
        state = "was already running" if was_running else "started"
        self.stdout.write(
            self.style.SUCCESS(
                f"PostgreSQL {server.version} + pgvector {state} in {server.pgdata} "
                f"(pid {server.pid}, Unix socket in {server.socket_dir}); database "
                f"{DEV_DATABASE!r} with roles {OWNER_ROLE!r} (owner) and {APP_ROLE!r} "
                "(application) ready."
            )
        )
        self.stdout.write(
            "\nIn settings.py, paste (or: from tulip_memory.postgres.devserver import "
            "dev_databases; DATABASES = dev_databases(BASE_DIR)):\n\n"
            f"{_python_literal(server_databases(server))}\n\n"
            "Then: python manage.py migrate --database=owner\n"
        )

    def _stop(self, pgdata: Path) -> None:
        if stop_dev_server(pgdata):
            self.stdout.write(
                self.style.SUCCESS(
                    f"Stopped the development database in {pgdata.resolve()} (data kept; "
                    "`start` runs it again)."
                )
            )
        else:
            self.stdout.write(f"No server runs in {pgdata.resolve()}: nothing to stop.")

    def _status(self, server: DevServer) -> None:
        if server.version is None:
            self.stdout.write(
                f"No development database in {server.pgdata} "
                "(manage.py tulip_memory_devdb start creates one)."
            )
        elif server.running:
            self.stdout.write(
                f"Running: PostgreSQL {server.version} in {server.pgdata} (pid {server.pid}), "
                f"Unix socket in {server.socket_dir} (port {server.port}), database "
                f"{DEV_DATABASE!r}."
            )
        else:
            self.stdout.write(
                f"Stopped: the data of PostgreSQL {server.version} is in {server.pgdata} "
                "(manage.py tulip_memory_devdb start runs it)."
            )


def _python_literal(databases: dict[str, dict[str, object]]) -> str:
    lines = ["DATABASES = {"]
    for alias, entry in databases.items():
        lines.append(f'    "{alias}": {{')
        lines.extend(f'        "{key}": {json.dumps(value)},' for key, value in entry.items())
        lines.append("    },")
    return "\n".join([*lines, "}"])
