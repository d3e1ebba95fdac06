"""Row-level security checks under plain ``check`` (no ``--database``) on ``default``.

In process for the application role; ``manage.py check`` in a child process for a default
alias that connects as a superuser, or to a server that is not there.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import checks
from django.db import connections

from tests.migration_connections import with_database
from tulip_memory.checks import tenancy
from tulip_memory.checks.tenancy import (
    check_connection,
    check_database_connections,
    check_default_tenant_database,
    check_tenant_databases,
    check_tenant_resolver,
    check_tenant_resolver_setting,
    search_path_of,
    settings_read,
)
from tulip_memory.postgres.rls import POLICY_NAME, tenant_tables

ROOT = Path(__file__).resolve().parents[2]


def _rls_ids(messages) -> list[str]:
    return sorted(
        m.id for m in messages if m.id.startswith(("tulip_memory.E01", "tulip_memory.W010"))
    )


def _manage_check(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    env.pop("DATABASE_OWNER_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.django_db
def test_plain_check_passes_for_the_application_role():
    assert _rls_ids(checks.run_checks()) == []
    assert check_default_tenant_database() == []


@pytest.mark.django_db
def test_plain_check_reports_a_bad_set_up_of_default(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384}
    assert _rls_ids(checks.run_checks()) == ["tulip_memory.E014"]


# E015 (check_database_connections) opens every PostgreSQL alias named, and Django's own
# database checks the MariaDB one.
POSTGRESQL_ALIASES = ["default", "owner", "prepared"]
EVERY_ALIAS = [*POSTGRESQL_ALIASES, "mysql"]


@pytest.mark.django_db(databases=EVERY_ALIAS)
def test_plain_and_named_runs_look_at_default_once(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384}
    assert _rls_ids(checks.run_checks()) == ["tulip_memory.E014"]
    assert _rls_ids(checks.run_checks(databases=["default"])) == ["tulip_memory.E014"]
    every = list(connections)  # what Django 6.1 passes to a plain run
    assert _rls_ids(checks.run_checks(databases=every)) == ["tulip_memory.E014"]


@pytest.mark.django_db(databases=POSTGRESQL_ALIASES)
def test_every_named_tenant_database_is_looked_at_once(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384, "TENANT_DATABASES": ["default", "owner"]}
    every = check_tenant_databases(databases=POSTGRESQL_ALIASES)
    # E014 once per alias (both reach the same column), W010 the owner's.
    assert _rls_ids(every) == ["tulip_memory.E014", "tulip_memory.E014", "tulip_memory.W010"]
    both = checks.run_checks(databases=["owner", "default"])
    assert _rls_ids(both) == _rls_ids(every)
    # A run that names no alias looks at default only.
    assert _rls_ids(checks.run_checks()) == ["tulip_memory.E014"]


def test_an_unreachable_tenant_database_is_an_info_and_a_named_one_an_error_too(monkeypatch):
    monkeypatch.setattr(tenancy, "connection_problem", lambda connection: "connection refused")
    plain = check_default_tenant_database()
    assert [(m.id, m.level) for m in plain] == [("tulip_memory.I010", checks.INFO)]
    assert "cannot be reached (connection refused)" in plain[0].msg
    named = check_database_connections(databases=["default"])
    assert [m.id for m in named] == ["tulip_memory.E015"]
    assert [m.id for m in check_tenant_databases(databases=["default"])] == ["tulip_memory.I010"]


@pytest.mark.django_db
def test_a_run_that_names_no_database_looks_at_none(settings):
    # `manage.py test` without database tests passes no alias.
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384}
    assert check_tenant_databases(databases=[]) == []


@pytest.mark.django_db
def test_only_a_postgresql_tenant_database_is_checked(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384, "TENANT_DATABASES": ["owner"]}
    assert check_default_tenant_database() == []


def test_manage_py_check_fails_when_default_connects_as_a_superuser():
    superuser = with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    result = _manage_check(superuser)
    assert result.returncode == 1, result.stderr
    assert "tulip_memory.E010" in result.stderr and "tulip_memory.E011" not in result.stderr
    assert "a superuser" in result.stderr


def test_manage_py_check_passes_without_a_reachable_database_and_says_what_it_skipped(
    django_db_setup,
):
    # (The MariaDB database of the session: under Django 6.1 the model checks of a plain
    # run open every alias, and warn that MariaDB ignores the conditions of indexes, W037.)
    with socket.socket() as probe:  # a port of 127.0.0.1 nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = _manage_check(f"postgres://nobody@127.0.0.1:{port}/nothing")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "?: (tulip_memory.I010) The row-level security of database 'default' was not " in output
    assert "checked: it cannot be reached (" in output
    assert output.count("(tulip_memory.") == 1


def _unreachable_url() -> str:
    with socket.socket() as probe:  # a port of 127.0.0.1 nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgres://nobody@127.0.0.1:{port}/nothing"


def test_check_database_reports_an_unreachable_database_as_an_error_not_a_traceback():
    result = _manage_check(_unreachable_url(), "--database", "default")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "?: (tulip_memory.E015) Database alias 'default' cannot be reached (" in result.stderr
    assert result.stderr.count("tulip_memory.E015") == 1  # once, not once per check


def test_a_tenant_resolver_that_does_not_import_is_an_error(settings):
    settings.TULIP_MEMORY = {"TENANT_RESOLVER": "tulip_memory.middleware.nope"}
    [error] = check_tenant_resolver_setting()
    assert error.id == "tulip_memory.E016"
    assert error.msg.startswith(
        "TULIP_MEMORY['TENANT_RESOLVER'] ('tulip_memory.middleware.nope') cannot be imported: "
        'ImportError: Module "tulip_memory.middleware" does not define a "nope" attribute'
    )
    assert check_tenant_resolver() == []  # W011 leaves it to E016
    settings.TULIP_MEMORY = {"TENANT_RESOLVER": "tulip_memory.conf.DEFAULTS"}
    [error] = check_tenant_resolver_setting()
    assert "is not callable (it is dict)" in error.msg
    settings.TULIP_MEMORY = {}
    assert check_tenant_resolver_setting() == []


# --- E019: the setting the policy reads -------------------------------------------------------


def _e019(messages) -> list[checks.CheckMessage]:
    return [m for m in messages if m.id == "tulip_memory.E019"]


def test_the_settings_a_policy_reads_are_found_in_postgresqls_text_of_it():
    qual = (
        "(tenant = ( SELECT NULLIF(current_setting('tulip_memory.tenant'::text, true), "
        "''::text) AS \"nullif\"))"
    )
    assert settings_read(qual, None) == ["tulip_memory.tenant"]
    assert settings_read(qual, qual.replace("tulip_memory", "Other")) == [
        "other.tenant",
        "tulip_memory.tenant",
    ]
    assert settings_read("true", None) == [] == settings_read(None, None)
    assert settings_read("current_setting('a.it''s'::text)", None) == ["a.it's"]


@pytest.mark.django_db(databases=["default", "owner"])
def test_policies_reading_another_setting_than_tenant_setting_are_e019(settings):
    assert _e019(check_connection(connections["default"], "default")) == []
    settings.TULIP_MEMORY = {"TENANT_SETTING": "other.tenant"}
    # One for all the policies, one for the lexical search function.
    [error, function] = _e019(check_connection(connections["default"], "default"))
    assert function.msg.startswith(
        "The search function 'tulip_memory_lexical_pool' reads 'tulip_memory.tenant', but "
        "TULIP_MEMORY['TENANT_SETTING'] is 'other.tenant'"
    )
    assert "migrate tulip_memory 0013 --database=owner" in function.hint
    assert error.msg == (
        f"The policies 'tulip_tenant_isolation' of the tenant tables {tenant_tables()} read "
        "'tulip_memory.tenant', but TULIP_MEMORY['TENANT_SETTING'] is 'other.tenant', the "
        "setting tenant_atomic pins the tenant in: they never see the pinned tenant (no "
        "tenant would see its rows nor write any), or compare rows with a value set "
        "elsewhere."
    )
    assert error.hint.startswith(
        "Set TENANT_SETTING = 'tulip_memory.tenant' (the setting the policies were created "
        "with), or recreate the policies as the table owner, for each table T: DROP POLICY "
        "tulip_tenant_isolation ON T; CREATE POLICY tulip_tenant_isolation ON T USING "
        "(\"tenant\" = (SELECT NULLIF(current_setting('other.tenant', true), ''))) WITH CHECK ("
    )
    # Setting names ignore case, as PostgreSQL's do.
    settings.TULIP_MEMORY = {"TENANT_SETTING": "Tulip_Memory.TENANT"}
    assert _e019(check_connection(connections["default"], "default")) == []
    # A TENANT_SETTING that is no setting name is E004's, not compared.
    settings.TULIP_MEMORY = {"TENANT_SETTING": "tenant"}
    assert _e019(check_connection(connections["default"], "default")) == []
    # The statements of the hint recreate a policy with the setting. As the owner, in the
    # test's transaction (rolled back after it), which the checks then look through:
    # another connection would wait for the owner's lock on the table.
    settings.TULIP_MEMORY = {"TENANT_SETTING": "other.tenant"}
    owner = connections["owner"]
    statements = error.hint.split("for each table T: ", 1)[1]
    with owner.cursor() as cursor:
        cursor.execute(statements.replace(" ON T", " ON tulip_memory_store_item"))
    [error, _function] = _e019(check_connection(owner, "owner"))
    assert "tulip_memory_store_item" not in error.msg
    assert "'tulip_memory_checkpoint'" in error.msg


@pytest.mark.django_db(databases=["default", "owner"])
def test_a_policy_of_the_expected_name_that_reads_no_setting_is_e019():
    with connections["owner"].cursor() as cursor:  # rolled back after the test
        cursor.execute(f"DROP POLICY {POLICY_NAME} ON tulip_memory_store_item")
        cursor.execute(f"CREATE POLICY {POLICY_NAME} ON tulip_memory_store_item USING (true)")
    [error] = _e019(check_connection(connections["owner"], "owner"))
    assert "of the tenant tables ['tulip_memory_store_item'] read no setting, but" in error.msg
    assert error.hint.startswith(
        "Recreate the policies as the table owner, for each table T: DROP POLICY "
    )


# --- E012, E013: row level security and the policies of each tenant table ---------------------


def _by_id(messages, check_id: str) -> list[checks.CheckMessage]:
    return [m for m in messages if m.id == check_id]


@pytest.mark.django_db(databases=["default", "owner"])
def test_a_tenant_table_without_enable_or_force_is_e012_naming_it():
    owner = connections["owner"]
    assert _by_id(check_connection(owner, "owner"), "tulip_memory.E012") == []
    with owner.cursor() as cursor:  # in the test's transaction: rolled back afterwards
        cursor.execute("ALTER TABLE tulip_memory_checkpoint NO FORCE ROW LEVEL SECURITY")
        cursor.execute("ALTER TABLE tulip_memory_extraction_job DISABLE ROW LEVEL SECURITY")
    errors = sorted(_by_id(check_connection(owner, "owner"), "tulip_memory.E012"), key=str)
    assert [error.msg for error in errors] == [
        f"Tenant table {table!r} does not ENABLE and FORCE row level security."
        for table in ("tulip_memory_checkpoint", "tulip_memory_extraction_job")
    ]
    assert errors[0].hint.startswith("ALTER TABLE tulip_memory_checkpoint ENABLE ROW LEVEL")


@pytest.mark.django_db(databases=["default", "owner"])
def test_a_tenant_table_with_another_policy_or_a_changed_owner_policy_is_e013():
    owner = connections["owner"]
    assert _by_id(check_connection(owner, "owner"), "tulip_memory.E013") == []
    with owner.cursor() as cursor:  # in the test's transaction: rolled back afterwards
        cursor.execute("CREATE POLICY everything ON tulip_memory_extraction_queue USING (true)")
        # The store item table's owner read policy, widened to every command.
        cursor.execute("DROP POLICY tulip_owner_read ON tulip_memory_store_item")
        cursor.execute(
            "CREATE POLICY tulip_owner_read ON tulip_memory_store_item TO CURRENT_USER USING (true)"
        )
    errors = sorted(_by_id(check_connection(owner, "owner"), "tulip_memory.E013"), key=str)
    assert [error.msg.split(" has the policies ")[0] for error in errors] == [
        "Tenant table 'tulip_memory_extraction_queue'",
        "Tenant table 'tulip_memory_store_item'",
    ]
    assert "['everything', 'tulip_tenant_isolation']" in errors[0].msg
    assert "['tulip_owner_read', 'tulip_tenant_isolation']" in errors[1].msg


# --- E017: SECURITY DEFINER functions of the owner ------------------------------------------


def test_the_search_path_a_function_sets_is_read_as_postgresql_resolves_it():
    assert search_path_of(["search_path=pg_catalog, pg_temp"]) == ["pg_catalog", "pg_temp"]
    assert search_path_of(["work_mem=1MB", 'search_path="$user", Public']) == ["$user", "public"]
    assert search_path_of(['search_path="PG_CATALOG", pg_temp']) == ["PG_CATALOG", "pg_temp"]
    assert search_path_of(["work_mem=1MB"]) is None
    assert search_path_of(None) is None


@pytest.mark.django_db(databases=["default", "owner"])
def test_a_security_definer_function_of_the_owner_with_an_unpinned_search_path_is_e017():
    owner = connections["owner"]
    # tulip_memory's own (the tenant registry's, the lexical search) are pinned.
    assert _by_id(check_connection(owner, "owner"), "tulip_memory.E017") == []
    assert _by_id(check_connection(connections["default"], "default"), "tulip_memory.E017") == []
    with owner.cursor() as cursor:  # in the test's transaction: rolled back afterwards
        # The tenant registry's function as migration 0008 left it before 0016: the
        # migrating session's search path, "$user", public.
        cursor.execute(
            "ALTER FUNCTION tulip_memory_register_tenants() SET search_path FROM CURRENT"
        )
        for name, config in (
            ("tulip_test_caller_path", ""),
            ("tulip_test_public_first", "SET search_path = public, pg_temp"),
            ("tulip_test_pinned", "SET search_path = pg_catalog, pg_temp"),
        ):
            cursor.execute(
                f"CREATE FUNCTION {name}(integer) RETURNS integer LANGUAGE sql "
                f"SECURITY DEFINER {config} AS 'SELECT 1'"
            )
        # An invoker's function runs with its caller's rights: not concerned.
        cursor.execute(
            "CREATE FUNCTION tulip_test_invoker() RETURNS integer LANGUAGE sql AS 'SELECT 1'"
        )
    errors = _by_id(check_connection(owner, "owner"), "tulip_memory.E017")
    assert [error.msg.split(" of 'tulip_owner', ")[0] for error in errors] == [
        "The SECURITY DEFINER function tulip_memory_register_tenants()",
        "The SECURITY DEFINER function tulip_test_caller_path(integer)",
        "The SECURITY DEFINER function tulip_test_public_first(integer)",
    ]
    assert [error.msg.split(" runs with ")[1].split(":")[0] for error in errors] == [
        "the search path $user, public",
        "its caller's search path",
        "the search path public, pg_temp",
    ]
    assert errors[1].hint.startswith(
        "ALTER FUNCTION tulip_test_caller_path(integer) SET search_path = pg_catalog, pg_temp, "
        "and name every table, function and operator of its body by schema."
    )
    # Its own hint pins it.
    with owner.cursor() as cursor:
        cursor.execute(errors[1].hint.split(", and name")[0])
    assert len(_by_id(check_connection(owner, "owner"), "tulip_memory.E017")) == 2
