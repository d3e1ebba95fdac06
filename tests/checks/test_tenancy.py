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

from tests.migration_connections import with_database
from tulip_memory.checks.tenancy import (
    check_default_tenant_database,
    check_tenant_resolver,
    check_tenant_resolver_setting,
)

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


@pytest.mark.django_db
def test_named_databases_are_left_to_the_database_tagged_check(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384}
    # `check --database`, `migrate`, and `manage.py test` (even without database tests)
    # name their aliases: the untagged check stays out of their way.
    assert check_default_tenant_database(databases=[]) == []
    assert check_default_tenant_database(databases=["default"]) == []
    assert _rls_ids(checks.run_checks(databases=["default"])) == ["tulip_memory.E014"]


@pytest.mark.django_db
def test_only_a_postgresql_tenant_database_is_checked(settings):
    settings.TULIP_MEMORY = {"VECTOR_DIMENSIONS": 384, "TENANT_DATABASES": ["owner"]}
    assert check_default_tenant_database() == []


def test_manage_py_check_fails_when_default_connects_as_a_superuser():
    superuser = with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    result = _manage_check(superuser)
    assert result.returncode == 1, result.stderr
    assert "tulip_memory.E010" in result.stderr and "tulip_memory.E011" in result.stderr
    assert "a superuser" in result.stderr


def test_manage_py_check_passes_without_a_reachable_database_and_says_what_it_skipped():
    with socket.socket() as probe:  # a port of 127.0.0.1 nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = _manage_check(f"postgres://nobody@127.0.0.1:{port}/nothing")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "?: (tulip_memory.I010) The row-level security of database 'default' was not " in output
    assert "checked: it cannot be reached (" in output
    assert "System check identified 1 issue (0 silenced)." in output


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
