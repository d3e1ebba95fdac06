"""Row-level security between tenants, as the application role, with raw SQL and the ORM.

The application role (alias ``default``) is not a superuser, has no BYPASSRLS and does not
own the tables. Rows of two tenants are written, then every kind of access to the other
tenant's rows is attempted: nothing crosses.
"""

import pytest
from django.db import DatabaseError, connection, connections, transaction

from tulip_memory.models.store import MemoryItem
from tulip_memory.postgres.rls import POLICY_NAME, policy_expression, tenant_tables
from tulip_memory.postgres.search_index import OWNER_READ_POLICY
from tulip_memory.tenancy import tenant_atomic
from tulip_memory.tenancy.cluster import is_citus
from tulip_memory.tenancy.context import pin_statement
from tulip_memory.testing.postgres import OWNER_ROLE

TABLE = "tulip_memory_store_item"
INSERT = (
    f"INSERT INTO {TABLE} (tenant, namespace, key, value, metadata, search_text, "
    "embedding_source, created_at, updated_at, version) "
    "VALUES (%s, %s, %s, '1', '{}', ' ', '', now(), now(), 1)"
)


def _set_tenant(cursor, tenant):
    # The pin tenant_atomic sends: a set_config() would not reach Citus' workers.
    cursor.execute(pin_statement(cursor.db, "tulip_memory.tenant", tenant))


def _refused(cursor, sql, params=()):
    """Run ``sql`` in a savepoint; True if PostgreSQL refused it."""
    try:
        with transaction.atomic():
            cursor.execute(sql, params)
    except DatabaseError as exc:
        # Citus refuses to move a row to another tenant (its shard) before RLS is asked.
        refusals = ("row-level security", "row level security", "partition value")
        assert any(refusal in str(exc) for refusal in refusals), exc
        return True
    return False


@pytest.fixture
def two_tenants(db):
    for tenant in ("alpha", "beta"):
        with tenant_atomic(tenant), connection.cursor() as cursor:
            for key in ("k1", "k2"):
                cursor.execute(INSERT, [tenant, f"{tenant}/notes", key])


def test_raw_sql_sees_and_changes_only_its_tenant(two_tenants):
    with transaction.atomic(), connection.cursor() as cursor:
        _set_tenant(cursor, "alpha")
        cursor.execute(f"SELECT DISTINCT tenant FROM {TABLE}")
        assert cursor.fetchall() == [("alpha",)]
        cursor.execute(f"SELECT count(*) FROM {TABLE} WHERE tenant = 'beta'")
        assert cursor.fetchone() == (0,)
        cursor.execute(f"UPDATE {TABLE} SET value = '2' WHERE tenant = 'beta'")
        assert cursor.rowcount == 0
        cursor.execute(f"DELETE FROM {TABLE} WHERE tenant = 'beta'")
        assert cursor.rowcount == 0
        # Inserting under the other tenant's name, or moving a row to it: refused.
        assert _refused(cursor, INSERT, ["beta", "beta/notes", "forged"])
        assert _refused(cursor, f"UPDATE {TABLE} SET tenant = 'beta' WHERE key = 'k1'")
        # Its own tenant works.
        assert not _refused(cursor, INSERT, ["alpha", "alpha/notes", "k3"])
    with tenant_atomic("beta"), connection.cursor() as cursor:
        cursor.execute(f"SELECT key, value::int FROM {TABLE} ORDER BY key")
        assert cursor.fetchall() == [("k1", 1), ("k2", 1)]


def test_no_tenant_sees_nothing_and_cannot_insert(two_tenants):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() == (0,)
        assert _refused(cursor, INSERT, ["alpha", "alpha/notes", "x"])
        _set_tenant(cursor, "")
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() == (0,)
        assert _refused(cursor, INSERT, ["", "x", "x"])


def test_tenant_does_not_outlive_its_transaction(two_tenants):
    with tenant_atomic("alpha"):
        assert MemoryItem.objects.count() == 2
    # Same connection, next transaction: nothing (a session-scoped set_config would leak).
    with transaction.atomic():
        assert MemoryItem.objects.count() == 0


def _insert_item(tenant: str, key: str) -> MemoryItem:
    """An ORM insert of one item in namespace ``(tenant, "x")``."""
    return MemoryItem.objects.create(
        tenant=tenant,
        namespace=f"{tenant}/x",
        key=key,
        value=1,
        created_at="2026-01-01T00:00Z",
        updated_at="2026-01-01T00:00Z",
    )


def test_orm_sees_and_changes_only_its_tenant(two_tenants):
    with tenant_atomic("alpha"):
        assert set(MemoryItem.objects.values_list("tenant", flat=True)) == {"alpha"}
        assert not MemoryItem.objects.filter(tenant="beta").exists()
        assert MemoryItem.objects.filter(tenant="beta").update(value=3) == 0
        assert MemoryItem.objects.filter(tenant="beta").delete()[0] == 0
        assert MemoryItem.objects.filter(tenant="beta").clear() == 0
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            _insert_item("beta", "forged")
        # Citus refuses to move a row to another tenant (its shard) before RLS is asked.
        refused = "row-level security|partition value"
        with pytest.raises(DatabaseError, match=refused), transaction.atomic():
            MemoryItem.objects.filter(key="k1").update(tenant="beta")
    with tenant_atomic("beta"):
        assert sorted(MemoryItem.objects.values_list("key", "value")) == [("k1", 1), ("k2", 1)]


def test_orm_without_a_tenant_sees_nothing(two_tenants):
    assert MemoryItem.objects.count() == 0
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
        _insert_item("alpha", "x")


@pytest.mark.django_db(databases=["default", "owner"], transaction=True)
def test_force_applies_rls_to_the_owner_too():
    # Committed rows (the owner's connection cannot see an uncommitted test transaction).
    for tenant in ("alpha", "beta"):
        with tenant_atomic(tenant), connection.cursor() as cursor:
            for key in ("k1", "k2"):
                cursor.execute(INSERT, [tenant, f"{tenant}/notes", key])
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == ("tulip_owner",)
        # The owner reads the store items of every tenant (its own read policy, for the
        # search function: tulip_memory.postgres.search_index), ...
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() == (4,)
        # ... but writes none without a tenant (FORCE: the tenant policy holds its writes).
        cursor.execute(f"UPDATE {TABLE} SET value = '2'")
        assert cursor.rowcount == 0
    with transaction.atomic(using="owner"), connections["owner"].cursor() as cursor:
        _set_tenant(cursor, "alpha")
        cursor.execute(f"UPDATE {TABLE} SET value = '2' RETURNING tenant")
        assert cursor.fetchall() == [("alpha",), ("alpha",)]
        cursor.execute(f"DELETE FROM {TABLE} WHERE tenant = 'beta'")
        assert cursor.rowcount == 0


@pytest.mark.django_db
def test_every_tenant_table_has_exactly_the_expected_policy():
    tables = tenant_tables()
    assert TABLE in tables
    # On Citus a policy of a distributed table reads the setting without a sub-select.
    expression = policy_expression(subquery=not is_citus(connection))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class "
            "WHERE relname = ANY(%s) AND relkind = 'r'",
            [tables],
        )
        flags = {name: (enabled, forced) for name, enabled, forced in cursor.fetchall()}
        cursor.execute(
            "SELECT tablename, policyname, permissive, roles, cmd, qual, with_check "
            "FROM pg_policies WHERE schemaname = 'public' ORDER BY tablename, policyname"
        )
        policies = cursor.fetchall()
        # The expected predicate, as PostgreSQL prints it back.
        cursor.execute("CREATE TEMP TABLE tulip_policy_probe (tenant varchar(255)) ON COMMIT DROP")
        cursor.execute(f"CREATE POLICY probe ON tulip_policy_probe USING ({expression})")
        cursor.execute("SELECT qual FROM pg_policies WHERE tablename = 'tulip_policy_probe'")
        (expected_qual,) = cursor.fetchone()
    assert flags == dict.fromkeys(tables, (True, True))
    by_table = {}
    for table, name, permissive, roles, command, qual, with_check in policies:
        by_table.setdefault(table, []).append((name, permissive, roles, command, qual, with_check))
    expected = [(POLICY_NAME, "PERMISSIVE", ["public"], "ALL", expected_qual, expected_qual)]
    wanted = dict.fromkeys(tables, expected)
    # The store item table's owner may read it whole (tulip_memory.postgres.search_index: its
    # lexical search function reads the GIN index as the owner), and only read it.
    wanted[TABLE] = [
        (OWNER_READ_POLICY, "PERMISSIVE", [OWNER_ROLE], "SELECT", "true", None),
        *expected,
    ]
    assert {table: by_table.get(table) for table in tables} == wanted
    assert set(by_table) == set(tables)  # no stale policy on any other table
