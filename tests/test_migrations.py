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


def _refusal_of(using: str, monkeypatch, **changes: dict) -> str:
    """The migrate guard's message for ``using`` (something to migrate), the aliases'
    settings changed by ``changes`` (alias -> keys; None drops the alias) for the call."""
    from django.core.management.base import CommandError
    from django.db import connections

    from tulip_memory.postgres.migrate_guard import refuse_migrations_without_schema_rights

    aliases = {alias: dict(config) for alias, config in connections.settings.items()}
    for alias, change in changes.items():
        if change is None:
            aliases.pop(alias)
        else:
            aliases[alias] = {**aliases.get(alias, {}), **change}
    monkeypatch.setattr(connections, "settings", aliases)
    with pytest.raises(CommandError) as refused:
        refuse_migrations_without_schema_rights(None, using=using, plan=[object()])
    return str(refused.value)


@pytest.mark.django_db(databases=["default", "prepared"])
def test_the_migrate_guard_never_suggests_an_application_alias(monkeypatch):
    from django.test import override_settings

    # "prepared" is another alias of the application role; "default" (the first alias of
    # the same NAME) is the application's: the owner alias is the one to name.
    message = _refusal_of("prepared", monkeypatch)
    assert "migrate --database=owner` (role 'tulip_owner')" in message
    assert "--database=default" not in message
    # Nor an alias of TENANT_DATABASES whatever its role, nor one of another server.
    from django.db import connections

    elsewhere = {**connections.settings["owner"], "HOST": "db.elsewhere.example"}
    with override_settings(TULIP_MEMORY={"TENANT_DATABASES": ["default", "owner"]}):
        message = _refusal_of("default", monkeypatch, elsewhere=elsewhere)
    assert "--database=owner" not in message and "--database=elsewhere" not in message
    assert "add the table owner's role as another alias" in message
    assert "`manage.py migrate --database=table_owner`" in message  # an alias to add


@pytest.mark.django_db
def test_the_migrate_guard_gives_the_grant_when_the_owner_alias_may_not_create(monkeypatch):
    # The owner alias's role may not create in the schema either (here a role that exists
    # and cannot): its GRANT, then migrate through it; never the application alias.
    message = _refusal_of("default", monkeypatch, owner={"USER": "pg_monitor"})
    assert 'GRANT CREATE ON SCHEMA "public" TO "pg_monitor"' in message
    assert "then `manage.py migrate --database=owner`" in message
    assert "--database=default" not in message and "--database=prepared" not in message


@pytest.mark.django_db
def test_every_tenant_table_registers_its_tenants():
    # The tenant registry (admin switcher, extraction sweep) is filled by a trigger on each
    # tenant table: a new tenant table without it would hide its tenants from both.
    from django.db import connection

    from tulip_memory.postgres.rls import tenant_tables

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

    from tulip_memory.postgres.search_index import LEXICAL_FUNCTION, PASS_INDEX, WORDS_INDEX

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


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_lexical_function_of_a_database_migrated_before_keeps_its_ties_after_0015():
    from django.db import connection, connections

    from tulip_memory.postgres.search_index import LEXICAL_FUNCTION, _lexical_function_sql

    def body() -> str:
        with connections["owner"].cursor() as cursor:
            cursor.execute(
                "SELECT pg_get_functiondef(oid) FROM pg_proc WHERE proname = %s",
                [LEXICAL_FUNCTION],
            )
            return cursor.fetchone()[0]

    assert "WITH TIES" in body()
    try:
        # A database at 0014 before this change: the body cut its pool in plan order.
        call_command("migrate", "tulip_memory", "0014", database="owner", verbosity=0)
        assert "WITH TIES" in body()  # going back keeps the new body
        with connections["owner"].cursor() as cursor:
            cursor.execute("SELECT current_schema()")
            quote = connections["owner"].ops.quote_name
            schema = quote(cursor.fetchone()[0])
            table = f"{schema}.{quote('tulip_memory_store_item')}"
            old = _lexical_function_sql(schema, table, replace=True)
            cursor.execute(old.replace("FETCH FIRST in_pool ROWS WITH TIES", "LIMIT in_pool"))
        assert "WITH TIES" not in body()
    finally:
        call_command("migrate", "tulip_memory", database="owner", verbosity=0)
    assert "WITH TIES" in body()
    with connection.cursor() as cursor:  # its owner and grants kept
        cursor.execute(
            "SELECT has_function_privilege(current_user, oid, 'EXECUTE'), "
            "pg_get_userbyid(proowner) FROM pg_proc WHERE proname = %s",
            [LEXICAL_FUNCTION],
        )
        assert cursor.fetchone() == (True, connections["owner"].settings_dict["USER"])


# The tenant registry's function as migration 0008 created it before 0016.
REGISTER_TENANTS_BEFORE_0016 = """
CREATE OR REPLACE FUNCTION tulip_memory_register_tenants() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO tulip_memory_tenant (name, registered_at)
    SELECT DISTINCT tenant, now() FROM new_rows
    ON CONFLICT (name) DO NOTHING;
    RETURN NULL;
END
$$;
"""


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_security_definer_functions_of_a_database_migrated_before_are_pinned_by_0016():
    from django.db import connection, connections

    from tulip_memory.checks.tenancy import check_connection
    from tulip_memory.postgres.rls import tenant_tables
    from tulip_memory.postgres.search_index import LEXICAL_FUNCTION
    from tulip_memory.postgres.tenant_registry import FUNCTION

    def functions() -> list[tuple[object, ...]]:
        with connection.cursor() as cursor:  # as the application role sees them
            cursor.execute(
                "SELECT p.proname, p.proconfig[1], pg_get_userbyid(p.proowner), "
                "has_function_privilege(p.oid, 'EXECUTE'), "
                "(SELECT count(*) FROM pg_trigger t WHERE t.tgfoid = p.oid), "
                'p.prosrc LIKE \'%"public"."tulip_memory_tenant"%\' '
                "OR p.prosrc LIKE '%OPERATOR(pg_catalog.@@)%' "
                "FROM pg_proc p WHERE p.prosecdef ORDER BY 1"
            )
            return cursor.fetchall()

    def e017() -> list[str]:
        messages = check_connection(connection, "default")
        return [m.msg.split(" of ")[0] for m in messages if m.id == "tulip_memory.E017"]

    owner = connections["owner"].settings_dict["USER"]
    triggers = len(tenant_tables())
    pinned = [
        (LEXICAL_FUNCTION, "search_path=pg_catalog, pg_temp", owner, True, 0, True),
        (FUNCTION, "search_path=pg_catalog, pg_temp", owner, False, triggers, True),
    ]
    assert functions() == pinned and e017() == []
    try:
        call_command("migrate", "tulip_memory", "0015", database="owner", verbosity=0)
        assert functions() == pinned  # going back keeps the pinned bodies
        with connections["owner"].cursor() as cursor:
            cursor.execute(REGISTER_TENANTS_BEFORE_0016)
        assert functions()[1] == (
            FUNCTION,
            'search_path="$user", public',
            owner,
            False,
            triggers,
            False,
        )
        assert e017() == [f"The SECURITY DEFINER function {FUNCTION}()"]
    finally:
        call_command("migrate", "tulip_memory", database="owner", verbosity=0)
    assert functions() == pinned and e017() == []
