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


@pytest.fixture
def legacy_database():
    """(superuser URL, legacy role, owner role, app role) of a database whose project tables
    (Django's auth and contenttypes, django_migrations, a user) were migrated by a role
    ``legacy_*`` before tulip_memory joined it; all dropped afterwards."""
    admin = os.environ["TULIP_TEST_ADMIN_URL"]
    suffix = os.getpid()
    name = f"legacy_db_{suffix}"
    legacy, owner, app = (f"{kind}_{suffix}" for kind in ("legacy", "legacy_owner", "legacy_app"))

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            for role in (app, owner, legacy):
                conn.execute(f"DROP ROLE IF EXISTS {role}")

    drop()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {legacy} LOGIN")
        conn.execute(f"CREATE DATABASE {name} OWNER {legacy}")
    superuser = with_database(admin, name)
    as_legacy = _as_role(superuser, legacy)
    migrated = _manage(
        "migrate", "auth", "--database=owner", "--verbosity=0",
        DATABASE_URL=as_legacy, DATABASE_OWNER_URL=as_legacy,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(as_legacy) as conn:
        conn.execute(
            "INSERT INTO auth_user (username, password, is_superuser, first_name, last_name, "
            "email, is_staff, is_active, date_joined) "
            "VALUES ('ada', '', false, '', '', '', false, true, now())"
        )
    yield superuser, legacy, owner, app
    drop()


def _schema_owner(url: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'"
        ).fetchone()[0]


def _app_uses_the_project_tables(url: str) -> None:
    """The application role reads and writes the project's existing tables (the identity
    sequence of auth_user included), and has no right beyond DML."""
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT username FROM auth_user").fetchall() == [("ada",)]
        conn.execute(
            "INSERT INTO auth_user (username, password, is_superuser, first_name, last_name, "
            "email, is_staff, is_active, date_joined) "
            "VALUES ('bob', '', false, '', '', '', false, true, now())"
        )
        conn.execute("UPDATE django_content_type SET model = model")
        assert conn.execute(
            "SELECT has_table_privilege('auth_user', 'TRUNCATE'), "
            "has_table_privilege('auth_user', 'REFERENCES'), "
            "has_schema_privilege('public', 'CREATE')"
        ).fetchone() == (False, False, False)


def test_an_existing_project_owned_by_the_owner_role_gets_its_tables_granted(legacy_database):
    superuser, legacy, _owner, app = legacy_database
    args = ("tulip_memory_setup_roles", "--owner-role", legacy, "--app-role", app)
    dry = _manage(*args, "--dry-run", DATABASE_URL=superuser)
    assert dry.returncode == 0, dry.stderr
    assert f"existing tables of {legacy!r} in schema public: {app!r} gets DML" in dry.stdout
    granted = [line for line in dry.stdout.splitlines() if line.startswith("GRANT SELECT, INSERT")]
    assert len(granted) == 1 and granted[0].endswith(f' TO "{app}";'), dry.stdout
    assert '"public"."auth_user"' in granted[0] and '"public"."django_migrations"' in granted[0]
    (sequences,) = [line for line in dry.stdout.splitlines() if " ON SEQUENCE " in line]
    assert sequences.startswith("GRANT USAGE, SELECT ON SEQUENCE ")
    assert '"public"."auth_user_id_seq"' in sequences and sequences.endswith(f' TO "{app}";')
    done = _manage(*args, DATABASE_URL=superuser)
    assert done.returncode == 0, done.stderr
    assert f"existing tables of {legacy!r} too" in done.stdout
    _app_uses_the_project_tables(_as_role(superuser, app))
    # The owner migrates tulip_memory beside the project's tables; the app role checks.
    urls = _migrated_as(superuser, owner=legacy, app=app)
    checked = _manage("check", **urls)
    assert checked.returncode == 0, checked.stderr + checked.stdout


def _migrated_as(superuser, *, owner, app):
    """``migrate --database=owner`` run as ``owner`` (the app as ``app``); the URLs."""
    urls = {
        "DATABASE_URL": _as_role(superuser, app),
        "DATABASE_OWNER_URL": _as_role(superuser, owner),
    }
    migrated = _manage("migrate", "--database=owner", "--verbosity=0", **urls)
    assert migrated.returncode == 0, migrated.stderr
    return urls


def test_tables_of_another_role_are_refused_first_with_what_to_do(legacy_database):
    superuser, legacy, owner, app = legacy_database
    args = ("tulip_memory_setup_roles", "--owner-role", owner, "--app-role", app)
    for extra in ((), ("--dry-run",)):
        refused = _manage(*args, *extra, DATABASE_URL=superuser)
        assert refused.returncode == 1, refused.stdout
        message = " ".join(refused.stderr.split())
        assert f"already has tables of another role than the owner role {owner!r}" in message
        assert f"{legacy!r} owns" in message and "django_migrations" in message
        assert f"--owner-role {legacy}" in message
        assert f'REASSIGN OWNED BY "{legacy}" TO "{owner}"' in message
        assert "nothing was changed" in message
    # Nothing was changed: no role created, the schema is still the database owner's.
    with psycopg.connect(superuser) as conn:
        made = conn.execute(
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", [[owner, app]]
        ).fetchall()
    assert made == [] and _schema_owner(superuser) == "pg_database_owner"
    # The advice works: the tables given to the owner role, the set-up and migrate pass.
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {owner} LOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f'REASSIGN OWNED BY "{legacy}" TO "{owner}"')
    done = _manage(*args, DATABASE_URL=superuser)
    assert done.returncode == 0, done.stderr
    _app_uses_the_project_tables(_as_role(superuser, app))
    _migrated_as(superuser, owner=owner, app=app)


def test_tables_of_a_superuser_are_refused_with_the_statements_that_give_them_away(
    legacy_database,
):
    superuser, legacy, _owner, app = legacy_database
    with psycopg.connect(superuser, autocommit=True) as conn:
        conn.execute("CREATE TABLE superusers_table (id int)")
        admin = conn.execute("SELECT current_user").fetchone()[0]
    refused = _manage(
        "tulip_memory_setup_roles", "--owner-role", legacy, "--app-role", app,
        DATABASE_URL=superuser,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stdout
    message = " ".join(refused.stderr.split())
    assert f"{admin!r} owns 1 (superusers_table)" in message
    assert f'ALTER TABLE "superusers_table" OWNER TO "{legacy}";' in message
    assert f"--owner-role {admin}" not in message


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
    assert 'GRANT CONNECT ON DATABASE "tulip_test" TO "tulip_owner";' in lines
    # The tables the owner already owns are granted too (default privileges cover only
    # tables created later), an extension's own tables and other schemas' never.
    (granted,) = [line for line in lines if line.startswith("GRANT SELECT, INSERT, UPDATE")]
    assert granted.endswith(' TO "someone_new";') and "TRUNCATE" not in granted
    assert '"public"."tulip_memory_store_item"' in granted
    assert '"public"."django_migrations"' in granted


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
