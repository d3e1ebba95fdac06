"""How many sessions of the test database wait for a lock: on Citus, on any node (the waits
on a worker's shards counted by the distributed transaction waiting)."""

from django.db import connections

from tulip_memory.tenancy.cluster import is_citus


def waiting_for_locks() -> int:
    with connections["default"].cursor() as cursor:
        if is_citus(connections["default"]):
            cursor.execute("SELECT count(DISTINCT waiting_gpid) FROM citus_lock_waits")
        else:
            cursor.execute(
                "SELECT count(*) FROM pg_catalog.pg_locks l "
                "JOIN pg_catalog.pg_database d ON d.oid = l.database OR l.database IS NULL "
                "WHERE NOT l.granted AND d.datname = current_database()"
            )
        (count,) = cursor.fetchone()
    return count
