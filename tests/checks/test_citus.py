"""Checks of a Citus coordinator (E070, E071, W072): none on a single server nor on the test
cluster as set up; on the cluster, a tenant table taken out of the distribution, a
session whose SET LOCAL is not propagated and a moved shard's old copy are reported."""

from __future__ import annotations

import os

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, connections

from tulip_memory.checks.citus import check_citus_databases

on_citus = pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") != "citus",
    reason="runs on a Citus cluster (TULIP_TEST_BACKEND=citus: make test-citus)",
)


def _ids(messages):
    return [message.id for message in messages]


@pytest.mark.django_db
def test_a_database_as_set_up_has_no_citus_error():
    assert check_citus_databases(databases=["default"]) == []


@on_citus
@pytest.mark.django_db
def test_a_session_whose_pin_stays_on_the_coordinator_is_e071():
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL citus.propagate_set_commands = 'none'")
        [error] = check_citus_databases(databases=["default"])
    assert error.id == "tulip_memory.E071"
    assert "'tulip_app'" in error.msg and "'none'" in error.msg


@on_citus
@pytest.mark.django_db(databases=["default", "owner"], transaction=True)
def test_a_tenant_table_apart_from_the_others_is_e070_until_distributed_again():
    table = "tulip_memory_erasure_receipt"
    with connections["owner"].cursor() as cursor:
        cursor.execute(
            "SELECT update_distributed_table_colocation(%s, colocate_with => 'none')", [table]
        )
    try:
        [error] = check_citus_databases(databases=["default"])
        assert error.id == "tulip_memory.E070"
        assert "2 co-location groups" in error.msg
    finally:
        call_command("tulip_memory_distribute", database="owner", verbosity=0)
    assert check_citus_databases(databases=["default"]) == []


@on_citus
@pytest.mark.django_db(databases=["default", "owner"], transaction=True)
def test_a_moved_shards_old_copy_is_w072_until_the_owner_drops_it():
    from tests.migration_connections import with_database

    url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], connection.settings_dict["NAME"])
    with psycopg.connect(url, autocommit=True) as admin:
        # The maintenance daemon would drop the copy within seconds: off while the test looks.
        admin.execute("ALTER SYSTEM SET citus.defer_shard_delete_interval = -1")
        admin.execute("SELECT pg_reload_conf()")
        try:
            shard, source, port = admin.execute(
                "SELECT shardid, nodename, nodeport FROM pg_dist_shard_placement "
                "JOIN pg_dist_shard USING (shardid) "
                "WHERE logicalrelid = 'tulip_memory_store_item'::regclass LIMIT 1"
            ).fetchone()
            target, target_port = admin.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' "
                "AND shouldhaveshards AND (nodename, nodeport) <> (%s, %s) LIMIT 1",
                [source, port],
            ).fetchone()
            admin.execute(
                "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, "
                "shard_transfer_mode => 'block_writes')",
                [shard, source, port, target, target_port],
            )
            [warning] = check_citus_databases(databases=["default"])
            assert warning.id == "tulip_memory.W072"
            assert "an erasure does not reach them" in warning.msg
            with connections["owner"].cursor() as cursor:
                cursor.execute("CALL citus_cleanup_orphaned_resources()")
            assert check_citus_databases(databases=["default"]) == []
        finally:
            admin.execute("ALTER SYSTEM RESET citus.defer_shard_delete_interval")
            admin.execute("SELECT pg_reload_conf()")
