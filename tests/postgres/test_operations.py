"""tulip_memory.postgres.operations: vector extension, ANN index, search vector, wrapper."""

import os

import pytest
from django.db import connections

from tests.migration_connections import connect, scratch_database, state_after_0001, with_database
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.postgres.operations import (
    AddSearchVector,
    CreateVectorAnnIndex,
    EnableVectorExtension,
    PostgreSQLOnly,
)


@pytest.mark.django_db(databases=["default", "owner"])
def test_ann_index_is_opt_in_and_skipped_over_2000_dimensions(settings):
    owner = connections["owner"]
    state = state_after_0001(owner)
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


@pytest.mark.django_db
def test_missing_vector_extension_fails_with_the_fix():
    with scratch_database("tulip_noext", owner="tulip_owner") as name:
        owner_url = with_database(os.environ["DATABASE_OWNER_URL"], name)
        with (
            connect(owner_url, "tulip_noext_owner") as owner,
            owner.schema_editor(atomic=False) as editor,
            pytest.raises(ConfigurationError, match=r"CREATE EXTENSION vector"),
        ):
            EnableVectorExtension().database_forwards("tulip_memory", editor, None, None)
        admin_url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], name)
        with connect(admin_url, "tulip_noext_admin") as admin:
            with admin.schema_editor(atomic=False) as editor:  # a superuser creates it
                EnableVectorExtension().database_forwards("tulip_memory", editor, None, None)
            with admin.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
                assert cursor.fetchone() == (1,)


def test_postgresql_only_serialises_into_migration_files():
    from django.db import migrations, models
    from django.db.migrations.writer import OperationWriter

    wrapped = PostgreSQLOnly(
        migrations.AddIndex("memoryitem", models.Index(fields=["tenant"], name="x_idx"))
    )
    text, imports = OperationWriter(wrapped, indentation=0).serialize()
    assert "tulip_memory.postgres.operations" in text
    assert "import tulip_memory.postgres.operations" in imports


@pytest.mark.django_db(databases=["default", "mysql"])
def test_vector_extension_is_skipped_on_mariadb():
    mysql = connections["mysql"]
    state = state_after_0001(mysql)
    with mysql.schema_editor(collect_sql=True) as editor:
        EnableVectorExtension().database_forwards("tulip_memory", editor, state, state)
    assert editor.collected_sql == []


@pytest.mark.django_db(databases=["default", "owner"])
def test_search_vector_is_generated_with_the_configured_text_search_config(settings):
    owner = connections["owner"]
    state = state_after_0001(owner)
    operation = AddSearchVector("memoryitem")

    def sql_of(direction: str = "forwards"):
        with owner.schema_editor(collect_sql=True) as editor:
            getattr(operation, f"database_{direction}")("tulip_memory", editor, state, state)
        return " ".join(editor.collected_sql)

    forwards = sql_of()
    generated = "search_vector tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig"
    assert generated in forwards
    assert "search_length integer GENERATED ALWAYS AS (length(" in forwards
    assert "gin" not in forwards.lower()  # no GIN index: RLS keeps @@ from using one
    assert "DROP COLUMN search_vector, DROP COLUMN search_length" in sql_of("backwards")
    settings.TULIP_MEMORY = {"TEXT_SEARCH_CONFIG": "simple"}
    assert "to_tsvector('simple'::regconfig" in sql_of()
    settings.TULIP_MEMORY = {"TEXT_SEARCH_CONFIG": "english'); DROP TABLE x; --"}
    with pytest.raises(ValueError, match="must name a PostgreSQL text search configuration"):
        sql_of()


def test_search_vector_is_postgresql_only():
    class OtherVendor:
        class connection:  # a schema editor's attribute
            vendor = "sqlite"

        def execute(self, sql):
            raise AssertionError(f"ran {sql!r} on another vendor")

    operation = AddSearchVector("memoryitem")
    operation.database_forwards("tulip_memory", OtherVendor(), None, None)
    operation.database_backwards("tulip_memory", OtherVendor(), None, None)
