"""tulip_memory.rls: the migration operations on each vendor, and the row-level security checks."""

import os
import uuid
from contextlib import contextmanager

import pytest
from django.core import checks
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from tulip_memory.exceptions import ConfigurationError
from tulip_memory.rls import (
    POLICY_NAME,
    CreateVectorAnnIndex,
    EnableTenantRowLevelSecurity,
    EnableVectorExtension,
    PostgreSQLOnly,
    check_connection,
    check_tenant_databases,
)
from tulip_memory.testing.postgres import database_settings

TABLE = "tulip_memory_store_item"


@contextmanager
def _connect(url, alias, vendor_module="django.db.backends.postgresql.base"):
    """A connection outside settings.DATABASES (closed on exit)."""
    import importlib

    settings_dict = dict(connections["default"].settings_dict)
    parsed = database_settings(url)
    settings_dict.update({key: parsed[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
    wrapper = importlib.import_module(vendor_module).DatabaseWrapper(settings_dict, alias=alias)
    try:
        yield wrapper
    finally:
        wrapper.close()


def _with_database(url, name):
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def _ids(messages):
    return sorted(
        m.id for m in messages if m.id.startswith(("tulip_memory.E01", "tulip_memory.W01"))
    )


# --- system checks ---------------------------------------------------------------------


@pytest.mark.django_db
def test_application_role_passes_the_checks():
    messages = checks.run_checks(databases=["default"], tags=[checks.Tags.database])
    assert _ids(messages) == []
    assert check_tenant_databases(databases=None) == []


@pytest.mark.django_db
def test_superuser_connection_is_an_error():
    admin_url = _with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    with _connect(admin_url, "tulip_admin") as admin:
        messages = check_connection(admin, "tulip_admin")
    # A superuser bypasses row-level security (and has BYPASSRLS).
    assert "tulip_memory.E010" in _ids(messages) and "tulip_memory.E011" in _ids(messages)
    assert "superuser" in next(m.msg for m in messages if m.id == "tulip_memory.E010")


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


def _state_after_0001(connection):
    return MigrationLoader(connection).project_state(("tulip_memory", "0001_initial"))


@pytest.mark.django_db(databases=["default", "owner"])
def test_row_level_security_operation_is_reversible():
    owner = connections["owner"]
    state = _state_after_0001(owner)
    operation = EnableTenantRowLevelSecurity("memoryitem")

    def flags():
        with owner.cursor() as cursor:
            cursor.execute(
                "SELECT relrowsecurity, relforcerowsecurity, "
                "(SELECT array_agg(polname) FROM pg_policy WHERE polrelid = c.oid) "
                "FROM pg_class c WHERE relname = %s",
                [TABLE],
            )
            return cursor.fetchone()

    assert flags() == (True, True, [POLICY_NAME])
    with owner.schema_editor() as editor:
        operation.database_backwards("tulip_memory", editor, state, state)
    assert flags() == (False, False, None)
    with owner.schema_editor() as editor:
        operation.database_forwards("tulip_memory", editor, state, state)
    assert flags() == (True, True, [POLICY_NAME])


@pytest.mark.django_db(databases=["default", "owner"])
def test_ann_index_is_opt_in_and_skipped_over_2000_dimensions(settings):
    owner = connections["owner"]
    state = _state_after_0001(owner)
    operation = CreateVectorAnnIndex("memoryitem", name="tulip_store_item_embedding_hnsw")

    def sql_of():
        with owner.schema_editor(collect_sql=True) as editor:
            operation.database_forwards("tulip_memory", editor, state, state)
        return editor.collected_sql

    assert sql_of() == []  # ANN_INDEX is off by default
    settings.TULIP_MEMORY = {"ANN_INDEX": True}
    assert any("USING hnsw" in line and "vector_cosine_ops" in line for line in sql_of())
    settings.TULIP_MEMORY = {"ANN_INDEX": True, "VECTOR_DIMENSIONS": 3072}
    with pytest.warns(RuntimeWarning, match="over pgvector's 2000-dimension limit"):
        assert sql_of() == []


def test_operations_serialise_into_migration_files():
    from django.db import migrations, models
    from django.db.migrations.writer import OperationWriter

    wrapped = PostgreSQLOnly(
        migrations.AddIndex("memoryitem", models.Index(fields=["tenant"], name="x_idx"))
    )
    for operation in (wrapped, EnableTenantRowLevelSecurity("memoryitem", column="owner_id")):
        text, imports = OperationWriter(operation, indentation=0).serialize()
        assert "tulip_memory.rls" in text and "import tulip_memory.rls" in imports
    assert (
        "column='owner_id'"
        in OperationWriter(
            EnableTenantRowLevelSecurity("memoryitem", column="owner_id"), indentation=0
        ).serialize()[0]
    )


@pytest.mark.django_db(databases=["default", "mysql"])
def test_postgresql_only_operations_are_skipped_on_mariadb():
    mysql = connections["mysql"]
    state = _state_after_0001(mysql)
    with mysql.schema_editor(collect_sql=True) as editor:
        EnableTenantRowLevelSecurity("memoryitem").database_forwards(
            "tulip_memory", editor, state, state
        )
        EnableVectorExtension().database_forwards("tulip_memory", editor, state, state)
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


@pytest.mark.django_db
def test_missing_vector_extension_fails_with_the_fix():
    admin_url = os.environ["TULIP_TEST_ADMIN_URL"]
    name = f"tulip_noext_{uuid.uuid4().hex[:8]}"
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} OWNER tulip_owner")
    try:
        owner_url = _with_database(os.environ["DATABASE_OWNER_URL"], name)
        with (
            _connect(owner_url, "tulip_noext_owner") as owner,
            owner.schema_editor(atomic=False) as editor,
            pytest.raises(ConfigurationError, match=r"CREATE EXTENSION vector"),
        ):
            EnableVectorExtension().database_forwards("tulip_memory", editor, None, None)
        with _connect(_with_database(admin_url, name), "tulip_noext_admin") as admin:
            with admin.schema_editor(atomic=False) as editor:  # a superuser creates it
                EnableVectorExtension().database_forwards("tulip_memory", editor, None, None)
            with admin.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
                assert cursor.fetchone() == (1,)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
