"""The app's migrations match its models (no missing migration), on every layer."""

import importlib
from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_makemigrations_check_is_clean():
    out = StringIO()
    call_command("makemigrations", "tulip_memory", check=True, dry_run=True, stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(databases=["mysql"])
def test_every_identifier_column_compares_byte_exactly_on_mariadb():
    from django.apps import apps
    from django.db import connections

    identifier_columns: dict[str, tuple[str, ...]] = {}
    for name in ("0004_checkpoint_identifier_collation", "0009_erasure"):
        module = importlib.import_module(f"tulip_memory.migrations.{name}")
        for table, columns in module.IDENTIFIER_COLUMNS.items():
            identifier_columns[table] = identifier_columns.get(table, ()) + columns
    tables = {model._meta.db_table for model in apps.get_app_config("tulip_memory").get_models()}
    with connections["mysql"].cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns "
            "WHERE table_schema = DATABASE() AND table_name LIKE 'tulip_memory%%'"
        )
        collations = {(table, column.lower()): name for table, column, name in cursor.fetchall()}
    # Every table with a tenant (every table that holds anybody's data) is covered ...
    with_tenant = {table for table, column in collations if column == "tenant"}
    assert with_tenant == set(identifier_columns) & tables == with_tenant & tables
    # ... and every listed column is binary and NO PAD: 'acme' != 'ACME' != 'acme '.
    for table, columns in identifier_columns.items():
        for column in columns:
            assert collations[(table, column)] in ("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
    with connections["mysql"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO tulip_memory_extraction_queue "
            "(tenant, namespace, last_sequence, lease_owner) VALUES "
            "('acme', 'acme/u', 0, ''), ('ACME', 'acme/u', 0, ''), ('acme ', 'acme/u', 0, '')"
        )
        cursor.execute("SELECT COUNT(*) FROM tulip_memory_extraction_queue WHERE tenant = 'acme'")
        assert cursor.fetchone() == (1,)


@pytest.mark.django_db(transaction=True)
def test_migrate_on_the_application_role_stops_with_what_to_run_instead():
    from django.core.management.base import CommandError
    from django.db import connection

    # Unapplying every migration would drop the tables: the app role must not even try.
    with pytest.raises(CommandError, match=r"'tulip_app'.*migrate --database=owner"):
        call_command("migrate", "tulip_memory", "zero", database="default", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('tulip_memory_store_item') IS NOT NULL")
        assert cursor.fetchone() == (True,)
    # Nothing to do: no error (the app role may run `migrate --check` in a deployment).
    call_command("migrate", database="default", verbosity=0)


@pytest.mark.django_db
def test_every_tenant_table_registers_its_tenants():
    # The tenant registry (admin switcher, extraction sweep) is filled by a trigger on each
    # tenant table: a new tenant table without it would hide its tenants from both.
    from django.db import connection

    from tulip_memory.rls import tenant_tables

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE t.tgname = 'tulip_register_tenant'"
        )
        registered = {name for (name,) in cursor.fetchall()}
    assert registered == set(tenant_tables())


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_search_index_migration_goes_back_and_forth_as_the_owner():
    from django.db import connection, connections

    from tulip_memory.search_index import LEXICAL_FUNCTION, PASS_INDEX, WORDS_INDEX

    def made() -> tuple[object, ...]:
        with connections["owner"].cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL, "
                "EXISTS (SELECT FROM pg_proc WHERE proname = %s), "
                "EXISTS (SELECT FROM pg_attribute WHERE attname = 'search_codes' "
                "AND attrelid = 'tulip_memory_store_item'::regclass AND NOT attisdropped)",
                [PASS_INDEX, WORDS_INDEX, LEXICAL_FUNCTION],
            )
            return cursor.fetchone()

    assert made() == (True, True, True, True)
    try:
        call_command("migrate", "tulip_memory", "0013", database="owner", verbosity=0)
        assert made() == (False, False, False, False)
    finally:
        call_command("migrate", "tulip_memory", database="owner", verbosity=0)
    assert made() == (True, True, True, True)
    with connection.cursor() as cursor:  # the application role may call it again
        cursor.execute(
            "SELECT has_function_privilege(current_user, oid, 'EXECUTE') FROM pg_proc "
            "WHERE proname = %s",
            [LEXICAL_FUNCTION],
        )
        assert cursor.fetchone() == (True,)
