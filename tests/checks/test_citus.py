"""Checks of a Citus coordinator (E070, E071): none on a single server nor on the test
cluster as set up; on the cluster, a tenant table taken out of the distribution and a
session whose SET LOCAL is not propagated are reported."""

from __future__ import annotations

import os

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
