"""tulip_memory.postgres.rls: the row-level security operation on each vendor, and the checks."""

import os
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.core import checks
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from tests.migration_connections import connect, state_after_0001, with_database
from tulip_memory.checks.tenancy import check_connection, check_default_tenant_database
from tulip_memory.postgres.rls import POLICY_NAME, EnableTenantRowLevelSecurity
from tulip_memory.postgres.search_index import OWNER_READ_POLICY

TABLE = "tulip_memory_store_item"


def _ids(messages):
    return sorted(
        m.id for m in messages if m.id.startswith(("tulip_memory.E01", "tulip_memory.W01"))
    )


# --- system checks ---------------------------------------------------------------------


@pytest.mark.django_db
def test_application_role_passes_the_checks():
    messages = checks.run_checks(databases=["default"], tags=[checks.Tags.database])
    assert _ids(messages) == []
    assert check_default_tenant_database() == []


@pytest.mark.django_db
def test_superuser_connection_is_an_error():
    admin_url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    with connect(admin_url, "tulip_admin") as admin:
        messages = check_connection(admin, "tulip_admin")
    # A superuser bypasses row-level security; E010 says so, and E011's remedy (NOBYPASSRLS)
    # would not help it, so it is not given.
    assert _ids(messages) == ["tulip_memory.E010"]
    assert "superuser" in messages[0].msg


@pytest.mark.django_db
def test_a_role_with_bypassrls_is_an_error_naming_the_remedy():
    admin_url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    role = "tulip_bypassing_check"
    with connect(admin_url, "tulip_admin") as admin, admin.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {role}")
        cursor.execute(f"CREATE ROLE {role} LOGIN BYPASSRLS")
    try:
        parts = urlsplit(admin_url)
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, ""))
        with connect(url, "bypassing") as bypassing:
            messages = check_connection(bypassing, "bypassing")
    finally:
        with connect(admin_url, "tulip_admin") as admin, admin.cursor() as cursor:
            cursor.execute(f"DROP ROLE {role}")
    assert _ids(messages) == ["tulip_memory.E011"]
    assert messages[0].hint == f"ALTER ROLE {role} NOBYPASSRLS"


@pytest.mark.django_db(databases=["default", "owner"])
def test_owner_without_force_and_extra_policies_are_reported():
    owner = connections["owner"]
    assert _ids(check_connection(owner, "owner")) == ["tulip_memory.W010"]
    with owner.cursor() as cursor:  # in the test's transaction: rolled back afterwards
        cursor.execute(f"ALTER TABLE {TABLE} NO FORCE ROW LEVEL SECURITY")
        cursor.execute(f"CREATE POLICY everything ON {TABLE} USING (true)")
    messages = check_connection(owner, "owner")
    assert _ids(messages) == ["tulip_memory.E012", "tulip_memory.E013", "tulip_memory.W010"]
    assert "'everything'" in next(m.msg for m in messages if m.id == "tulip_memory.E013")


@pytest.mark.django_db
def test_vector_width_differing_from_the_setting_is_an_error(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384}
    messages = check_connection(connections["default"], "default")
    assert _ids(messages) == ["tulip_memory.E014"]
    assert "vector(1024)" in messages[0].msg and "384" in messages[0].msg


@pytest.mark.django_db(databases=["default", "owner"])
def test_checks_only_look_at_the_tenant_databases(settings):
    settings.TULIP_MEMORY = {"TENANT_DATABASES": ["owner"]}
    messages = checks.run_checks(databases=["default", "owner"], tags=[checks.Tags.database])
    assert _ids(messages) == ["tulip_memory.W010"]


# --- migration operations ----------------------------------------------------------------


@pytest.mark.django_db(databases=["default", "owner"])
def test_row_level_security_operation_is_reversible():
    owner = connections["owner"]
    state = state_after_0001(owner)
    operation = EnableTenantRowLevelSecurity("memoryitem")

    def flags():
        with owner.cursor() as cursor:
            cursor.execute(
                "SELECT relrowsecurity, relforcerowsecurity, "
                "(SELECT array_agg(polname ORDER BY polname) FROM pg_policy "
                "WHERE polrelid = c.oid) "
                "FROM pg_class c WHERE relname = %s",
                [TABLE],
            )
            return cursor.fetchone()

    # (The owner's read policy is tulip_memory.postgres.search_index's.)
    assert flags() == (True, True, [OWNER_READ_POLICY, POLICY_NAME])
    with owner.schema_editor() as editor:
        operation.database_backwards("tulip_memory", editor, state, state)
    assert flags() == (False, False, [OWNER_READ_POLICY])
    with owner.schema_editor() as editor:
        operation.database_forwards("tulip_memory", editor, state, state)
    assert flags() == (True, True, [OWNER_READ_POLICY, POLICY_NAME])


def test_operation_serialises_into_migration_files():
    from django.db.migrations.writer import OperationWriter

    operation = EnableTenantRowLevelSecurity("memoryitem", column="owner_id")
    text, imports = OperationWriter(operation, indentation=0).serialize()
    assert "tulip_memory.postgres.rls" in text and "import tulip_memory.postgres.rls" in imports
    assert (
        "column='owner_id'"
        in OperationWriter(
            EnableTenantRowLevelSecurity("memoryitem", column="owner_id"), indentation=0
        ).serialize()[0]
    )


@pytest.mark.django_db(databases=["default", "mysql"])
def test_row_level_security_is_skipped_on_mariadb():
    mysql = connections["mysql"]
    state = state_after_0001(mysql)
    with mysql.schema_editor(collect_sql=True) as editor:
        EnableTenantRowLevelSecurity("memoryitem").database_forwards(
            "tulip_memory", editor, state, state
        )
    assert editor.collected_sql == []
    with mysql.cursor() as cursor:  # migrated by the session fixture: the plain table only
        cursor.execute(
            "SELECT DISTINCT index_name FROM information_schema.statistics "
            "WHERE table_schema = DATABASE() AND table_name = %s",
            [TABLE],
        )
        assert [name for (name,) in cursor.fetchall()] == ["PRIMARY"]


@pytest.mark.django_db(databases=["default", "owner"])
def test_sqlmigrate_shows_the_policy_on_postgresql():
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("sqlmigrate", "tulip_memory", "0001_initial", database="owner", stdout=out)
    sql = out.getvalue()
    assert "FORCE ROW LEVEL SECURITY" in sql and f'CREATE POLICY "{POLICY_NAME}"' in sql
    assert "USING" in sql and "WITH CHECK" in sql and "vector(1024)" in sql


def test_migration_0001_applies_on_sqlite(django_db_blocker):
    settings_dict = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": ":memory:",
        "ATOMIC_REQUESTS": False,
        "AUTOCOMMIT": True,
        "CONN_MAX_AGE": 0,
        "CONN_HEALTH_CHECKS": False,
        "OPTIONS": {},
        "TIME_ZONE": None,
        "USER": "",
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "TEST": {},
    }
    connections.settings["tulip_sqlite"] = settings_dict  # migrations open atomic(using=alias)
    sqlite = connections["tulip_sqlite"]
    try:
        with django_db_blocker.unblock():
            executor = MigrationExecutor(sqlite)
            executor.migrate([("tulip_memory", "0001_initial")])
            assert TABLE in sqlite.introspection.table_names()
            executor.loader.build_graph()
            executor.migrate([("tulip_memory", None)])  # and back
            assert TABLE not in sqlite.introspection.table_names()
    finally:
        sqlite.close()
        del connections["tulip_sqlite"]
        del connections.settings["tulip_sqlite"]
