"""The test bed itself: real PostgreSQL with pgvector, as a non-superuser role."""

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
