"""``manage.py tulip_memory_distribute``: refused without Citus; on a Citus coordinator
(``TULIP_TEST_BACKEND=citus``, whose test database the session distributed) every tenant
table is distributed on ``tenant`` in one co-location group, the registry is a reference
table, a second run has nothing to do, and a pinned tenant is registered and isolated.
"""

from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from tulip_memory.models.tenants import Tenant
from tulip_memory.postgres.rls import tenant_tables
from tulip_memory.tenancy import tenant_atomic
from tulip_memory.tenancy.cluster import is_citus

on_citus = pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") != "citus",
    reason="runs on a Citus cluster (TULIP_TEST_BACKEND=citus: make test-citus)",
)


@pytest.mark.skipif(os.environ.get("TULIP_TEST_BACKEND") == "citus", reason="has Citus")
@pytest.mark.django_db(databases=["default", "owner"])
def test_without_citus_it_refuses_and_changes_nothing():
    assert not is_citus(connections["owner"])
    with pytest.raises(CommandError, match=r"citus extension is not installed.*nothing"):
        call_command("tulip_memory_distribute", database="owner", dry_run=True)


@on_citus
@pytest.mark.django_db(databases=["default", "owner"])
def test_tenant_tables_are_distributed_and_co_located():
    with connections["owner"].cursor() as cursor:
        cursor.execute(
            "SELECT logicalrelid::text, partmethod, colocationid, "
            "column_to_column_name(logicalrelid, partkey) FROM pg_dist_partition"
        )
        rows = {table: rest for table, *rest in cursor.fetchall()}
    tables = tenant_tables()
    assert {rows[t][0] for t in tables} == {"h"}
    assert {rows[t][2] for t in tables} == {"tenant"}
    assert len({rows[t][1] for t in tables}) == 1  # one co-location group
    assert rows["tulip_memory_tenant"][0] == "n"  # a reference table
    out = StringIO()
    call_command("tulip_memory_distribute", database="owner", stdout=out)
    assert "already distributed, nothing to do" in out.getvalue()


@on_citus
@pytest.mark.django_db(transaction=True)
def test_a_pinned_tenant_is_registered_and_sees_only_its_rows_on_the_workers():
    from django.utils import timezone

    from tulip_memory.models.store import MemoryItem

    now = timezone.now()
    for tenant in ("alpha", "beta"):
        with tenant_atomic(tenant):
            MemoryItem.objects.create(
                tenant=tenant, namespace="n", key="k", value=1, created_at=now, updated_at=now
            )
    assert {"alpha", "beta"} <= set(Tenant.objects.names())
    with tenant_atomic("alpha"), connection.cursor() as cursor:
        # A multi-shard statement: every worker applies the pinned tenant's policy.
        cursor.execute("SELECT DISTINCT tenant FROM tulip_memory_store_item")
        assert cursor.fetchall() == [("alpha",)]


@on_citus
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("use_indexes", [False, True])
def test_a_search_of_one_tenant_runs_on_one_shard(use_indexes):
    from django.utils import timezone

    from tests.store.pg_statements import executions, explain, search_statements
    from tulip_memory.models.store import MemoryItem, UpsertRow
    from tulip_memory.store.pg.search import search_paths

    text = json.dumps({"text": "tulip bulbs"})
    rows = [
        UpsertRow("alpha", "alpha/notes", f"k{n}", text, "{}", "tulip bulbs", None, "")
        for n in range(3)
    ]
    with tenant_atomic("alpha"):
        MemoryItem.objects.upsert(rows)
    with tenant_atomic("alpha"):
        with executions() as calls:
            hits = search_paths(
                MemoryItem.objects.all(),
                "alpha",
                ["alpha/notes"],
                5,
                terms=["tulip"],
                now=timezone.now(),
                use_indexes=use_indexes,
            )
        [(sql, params)] = search_statements(calls)
        plan = explain(sql, params)
    assert sorted(hit.key for hit in hits) == ["k0", "k1", "k2"]
    assert "Task Count: 1\n" in plan, plan
    # From the indexes: the lexical function, run with the statement on the tenant's node.
    assert ("tulip_memory_lexical_pool" in sql) == use_indexes


@on_citus
@pytest.mark.django_db(databases=["default", "owner"])
def test_setup_roles_gives_both_roles_the_pins_propagation():
    out = StringIO()
    call_command("tulip_memory_setup_roles", database="owner", dry_run=True, stdout=out)
    for role in ("tulip_owner", "tulip_app"):
        assert f"ALTER ROLE \"{role}\" SET citus.propagate_set_commands = 'local';" in (
            out.getvalue()
        )
