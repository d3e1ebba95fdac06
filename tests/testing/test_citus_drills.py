"""Drills on a Citus cluster (tests.citus_cluster) while PgMemory serves tenants as the
application role: a third worker joined and the shards rebalanced under writes and searches,
a large tenant isolated to a shard of its own, a worker stopped and started again.

The module starts a cluster of its own (the session's stays untouched), joins its workers in
the ``postgres`` database and lets :func:`bootstrap_cluster` find them there, as it does for
``TULIP_CITUS_URL``. Each drill prints its figures (``pytest -s``; docs/benchmarks.md).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import OperationalError, connections

from tests.citus_cluster import (
    bootstrap_cluster,
    build_citus,
    join_worker,
    start_cluster,
    start_node,
    start_worker,
    stop_node,
)
from tulip_memory.store import PgMemory
from tulip_memory.sync_facade import sync_facade
from tulip_memory.tenancy import tenant_context
from tulip_memory.testing.postgres import database_settings

pytestmark = pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") != "citus",
    reason="runs on a Citus cluster (TULIP_TEST_BACKEND=citus: make test-citus)",
)

DBNAME, APP, OWNER = "tulip_drill", "drill", "drill_owner"
TENANTS = [f"tenant{n:02d}" for n in range(12)]
# What the application may see while the cluster changes under it, each worth a retry
# (docs/scale-out.md, "Drills"): a worker unreachable or a shard moved away mid-statement.
RETRYABLE = (OperationalError,)
# Shards move by copy while their writes wait: a move by logical replication never ends, its
# apply worker runs as the tables' owner, whom FORCE ROW LEVEL SECURITY binds.
MODE = "'block_writes'"


def namespace(tenant: str) -> tuple[str, ...]:
    return (tenant, "notes")


@pytest.fixture(scope="module")
def cluster(django_db_blocker):
    script = Path(os.environ.get("TULIP_CITUS_BUILD", ""))
    if script.is_file():
        build_citus(script)
    cluster = start_cluster(workers=2)
    with psycopg.connect(cluster.coordinator.url(), autocommit=True) as conn:
        for node in cluster.nodes:
            with psycopg.connect(node.url(), autocommit=True) as each:
                each.execute("CREATE EXTENSION citus")
        for worker in cluster.workers:
            conn.execute("SELECT citus_add_node(%s, %s)", worker.address)
    urls = bootstrap_cluster(cluster.coordinator.url(), DBNAME)
    connections.settings.update(
        {APP: database_settings(urls.app), OWNER: database_settings(urls.owner)}
    )
    connections.configure_settings(connections.settings)  # Django's defaults for both
    with django_db_blocker.unblock():
        call_command("migrate", database=OWNER, verbosity=0)
        call_command("tulip_memory_distribute", database=OWNER, verbosity=0)
        yield cluster
        for alias in (APP, OWNER):
            connections[alias].close()
            del connections[alias], connections.settings[alias]
    cluster.stop()


def admin(cluster, sql: str, params: object = None) -> list[tuple]:
    """``sql`` as the coordinator's superuser in the drills' database, in two minutes."""
    url = cluster.coordinator.url(DBNAME)
    with psycopg.connect(url, autocommit=True, options="-c statement_timeout=120s") as conn:
        return conn.execute(sql, params).fetchall()


def store():
    return sync_facade(PgMemory(using=APP))


def write(tenant: str, keys: list[str]) -> None:
    with tenant_context(tenant):
        store().put_batch([(namespace(tenant), k, {"text": f"tulip note {k}"}) for k in keys])


def missing(tenant: str, keys: list[str]) -> set[str]:
    with tenant_context(tenant):
        found = store().get_batch([(namespace(tenant), k) for k in keys])
    return set(keys) - {k for _, k in found}


def search(tenant: str) -> int:
    with tenant_context(tenant):
        return len(store().search(namespace(tenant), "tulip note", limit=5))


def node_of(cluster, tenant: str) -> str:
    [(host,)] = admin(
        cluster,
        "SELECT nodename FROM pg_dist_shard_placement WHERE shardid = "
        "get_shard_id_for_distribution_column('tulip_memory_store_item', %s::text)",
        [tenant],
    )
    return host


class Traffic:
    """Writes and searches over every tenant from threads, until stopped: the keys whose
    write returned and the errors seen, by class and first line."""

    def __init__(self, writers: int = 2) -> None:
        self.acknowledged: dict[str, list[str]] = {t: [] for t in TENANTS}
        self.errors: Counter[str] = Counter()
        self.searches = 0
        self.slowest = 0.0
        self.unexpected: list[BaseException] = []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self.writer, args=(n,)) for n in range(writers)]
        self.threads.append(threading.Thread(target=self.searcher))

    def run(self, work) -> None:
        try:
            while not self.done.is_set():
                started = time.perf_counter()
                try:
                    work()
                    self.slowest = max(self.slowest, time.perf_counter() - started)
                except RETRYABLE as exc:
                    self.errors[f"{type(exc).__name__}: {str(exc).splitlines()[0]}"] += 1
                except BaseException as exc:
                    self.unexpected.append(exc)
                    return
        finally:
            connections.close_all()

    def writer(self, number: int) -> None:
        count = iter(range(10**9))

        def one() -> None:
            n = next(count)
            tenant, key = TENANTS[n % len(TENANTS)], f"w{number}-{n}"
            write(tenant, [key])
            self.acknowledged[tenant].append(key)

        self.run(one)

    def searcher(self) -> None:
        count = iter(range(10**9))

        def one() -> None:
            search(TENANTS[next(count) % len(TENANTS)])
            self.searches += 1

        self.run(one)

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join(60)
        assert not self.unexpected, self.unexpected

    @property
    def writes(self) -> int:
        return sum(map(len, self.acknowledged.values()))


def test_a_third_worker_and_a_rebalance_under_writes_and_searches_lose_nothing(cluster):
    for tenant in TENANTS:
        write(tenant, [f"seed{n}" for n in range(20)])
    with Traffic() as traffic:
        time.sleep(1)
        started = time.perf_counter()
        worker = start_worker(cluster)
        join_worker(cluster.coordinator.url(), DBNAME, *worker.address)
        joined = time.perf_counter()
        admin(cluster, f"SELECT citus_rebalance_start(shard_transfer_mode => {MODE})")
        admin(cluster, "SELECT citus_rebalance_wait()")
        rebalanced = time.perf_counter()
        time.sleep(1)
    there = [t for t in TENANTS if node_of(cluster, t) == str(worker.pgdata)]
    print(
        f"\ndrill rebalance: worker joined in {joined - started:.1f} s, shards rebalanced in "
        f"{rebalanced - joined:.1f} s; {traffic.writes} writes and {traffic.searches} "
        f"searches meanwhile (slowest {traffic.slowest:.1f} s); errors: "
        f"{dict(traffic.errors) or 'none'}; tenants now on the new worker: {len(there)}"
    )
    assert there
    for tenant, keys in traffic.acknowledged.items():
        assert not missing(tenant, keys + [f"seed{n}" for n in range(20)]), tenant
    assert traffic.writes and traffic.searches


def test_a_large_tenant_isolated_to_its_own_shard_is_still_served(cluster):
    big = "tenant00"
    write(big, [f"big{n}" for n in range(2000)])
    with Traffic() as traffic:
        time.sleep(1)
        started = time.perf_counter()
        admin(
            cluster,
            "SELECT isolate_tenant_to_new_shard('tulip_memory_store_item', %s::text, 'CASCADE', "
            f"{MODE})",
            [big],
        )
        took = time.perf_counter() - started
        time.sleep(1)
    [(low, high)] = admin(
        cluster,
        "SELECT shardminvalue, shardmaxvalue FROM pg_dist_shard WHERE shardid = "
        "get_shard_id_for_distribution_column('tulip_memory_store_item', %s::text)",
        [big],
    )
    print(
        f"\ndrill isolation: a tenant of 2,000+ rows isolated in {took:.1f} s; "
        f"{traffic.writes} writes and {traffic.searches} searches meanwhile (slowest "
        f"{traffic.slowest:.1f} s); errors: {dict(traffic.errors) or 'none'}"
    )
    assert low == high  # the shard holds one hash value: this tenant's
    for tenant, keys in traffic.acknowledged.items():
        assert not missing(tenant, keys), tenant
    write(big, ["after"])
    assert not missing(big, ["after", "big0", "big1999"])
    assert search(big) == 5
    assert search("tenant01") == 5


def test_a_stopped_workers_tenants_fail_clearly_the_others_work_and_it_recovers(cluster):
    placed = {tenant: node_of(cluster, tenant) for tenant in TENANTS}
    [worker] = [w for w in cluster.workers if str(w.pgdata) == placed["tenant01"]]
    down = [t for t in TENANTS if placed[t] == str(worker.pgdata)]
    up = [t for t in TENANTS if t not in down]
    stop_node(worker)
    try:
        for tenant in down:
            with pytest.raises(OperationalError, match="connection to the remote node") as failed:
                write(tenant, ["while-down"])
            with pytest.raises(OperationalError, match="connection to the remote node"):
                search(tenant)
        for tenant in up:
            write(tenant, ["while-down"])
            assert search(tenant) == 5
    finally:
        start_node(worker)
    cause = failed.value.__cause__
    print(
        f"\ndrill worker down: {len(down)} of {len(TENANTS)} tenants failed with "
        f"{type(failed.value).__module__}.OperationalError from {type(cause).__name__} "
        f"(SQLSTATE {cause.sqlstate}): {str(failed.value).splitlines()[0]}"
    )
    assert isinstance(cause, psycopg.errors.ConnectionFailure)
    started, retried = time.perf_counter(), 0
    for tenant in down:
        while True:
            try:
                write(tenant, ["after-restart"])
                break
            except OperationalError:
                retried += 1
                assert time.perf_counter() - started < 30
    print(
        f"drill worker back: its tenants served again after {retried} failed retries, "
        f"{time.perf_counter() - started:.1f} s"
    )
    for tenant in down:
        assert search(tenant) == 5
        assert missing(tenant, ["after-restart", "while-down"]) == {"while-down"}
    assert not any(missing(tenant, ["while-down"]) for tenant in up)
