"""``manage.py tulip_memory_setup_roles``: a fresh database set up through a superuser
connection, then migrated by the owner and checked for the application role; and the
refusals (no superuser, bad role names, a missing password variable).

The set-up runs ``manage.py`` in a child process whose ``default`` alias is the embedded
server's superuser on a database of its own (created and dropped here, with its roles).
"""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.core.management import CommandError, call_command

from tests.migration_connections import with_database

ROOT = Path(__file__).resolve().parents[2]


def _as_role(url: str, role: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{role}@{host}", parts.path, parts.query, ""))


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **env}
    if "DATABASE_OWNER_URL" not in env:
        environment.pop("DATABASE_OWNER_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        check=False,
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def fresh_database():
    """(database, owner role, app role) of a new, empty database; all dropped afterwards."""
    admin = os.environ["TULIP_TEST_ADMIN_URL"]
    suffix = os.getpid()
    name, owner, app = f"roles_{suffix}", f"roles_owner_{suffix}", f"roles_app_{suffix}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    yield name, owner, app
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {owner}")
        conn.execute(f"DROP ROLE IF EXISTS {app}")


def test_sets_up_a_fresh_database_idempotently_and_the_two_roles_work(fresh_database):
    name, owner, app = fresh_database
    superuser = with_database(os.environ["TULIP_TEST_ADMIN_URL"], name)
    args = ("tulip_memory_setup_roles", "--owner-role", owner, "--app-role", app)
    first = _manage(
        *args, "--app-password-env", "APP_SECRET", DATABASE_URL=superuser, APP_SECRET="s3"
    )
    assert first.returncode == 0, first.stderr
    assert f"({owner!r}, {app!r} created)" in first.stdout
    with psycopg.connect(superuser) as conn:
        roles = {
            row[0]: row[1:]
            for row in conn.execute(
                "SELECT rolname, rolsuper, rolbypassrls, rolcanlogin, rolpassword IS NOT NULL "
                "FROM pg_authid WHERE rolname = ANY(%s)",
                [[owner, app]],
            )
        }
        assert roles == {owner: (False, False, True, False), app: (False, False, True, True)}
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'btree_gin'").fetchone()
        schema_owner = conn.execute(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'"
        ).fetchone()[0]
        assert schema_owner == owner
    again = _manage(*args, DATABASE_URL=superuser)
    assert again.returncode == 0, again.stderr
    assert "(none created)" in again.stdout
    # The owner migrates; the application role then passes plain `check` (RLS checks).
    urls = {
        "DATABASE_URL": _as_role(superuser, app),
        "DATABASE_OWNER_URL": _as_role(superuser, owner),
    }
    migrated = _manage("migrate", "--database=owner", "--verbosity=0", **urls)
    assert migrated.returncode == 0, migrated.stderr
    checked = _manage("check", **urls)
    assert checked.returncode == 0, checked.stderr + checked.stdout


def _setup_roles(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_setup_roles", *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.django_db
def test_dry_run_prints_the_sql_through_any_connection():
    output = _setup_roles("--owner-role", "tulip_owner", "--app-role", "someone_new", "--dry-run")
    lines = output.splitlines()
    assert lines[0] == "-- As a superuser, in database 'tulip_test':"
    assert (
        'CREATE ROLE "someone_new" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;' in lines
    )
    assert not any('CREATE ROLE "tulip_owner"' in line for line in lines)  # it exists
    assert "-- role 'tulip_owner' exists: kept as it is" in lines
    assert "CREATE EXTENSION IF NOT EXISTS vector;" in lines
    assert "CREATE EXTENSION IF NOT EXISTS btree_gin;" in lines
    assert 'GRANT CONNECT ON DATABASE "tulip_test" TO "someone_new";' in lines


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "connects as 'tulip_app', which is not a superuser"),
        (("--app-role", "Robert'); DROP"), "Role name .* is not a plain lower-case SQL"),
        (("--owner-role", "same", "--app-role", "same"), "both 'same'"),
        (("--app-password-env", "TULIP_NO_SUCH_VARIABLE"), "TULIP_NO_SUCH_VARIABLE is unset"),
        (("--database", "mysql"), "mysql; this command works on postgresql"),
        (("--tenant", "acme"), "unrecognized arguments: --tenant"),
        (("--app-role", "postgres", "--dry-run"), "'postgres' exists and is a superuser or"),
        (("--owner-role", "postgres"), "'postgres' exists .* cannot be the owner role"),
        (("--owner-role", "postgres", "--dry-run"), "'postgres' exists .* cannot be the owner"),
    ],
)
def test_bad_input_is_refused(args, message):
    with pytest.raises(CommandError, match=message):
        _setup_roles(*args)
    with psycopg.connect(os.environ["TULIP_TEST_ADMIN_URL"]) as conn:
        assert not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'same'").fetchone()
