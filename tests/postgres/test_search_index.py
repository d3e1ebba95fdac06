"""tulip_memory.postgres.search_index: the codes, both indexes, the owner's read policy and the
lexical function, as migrated; who may read what through them; reversing the operation."""

import time

import pytest
from django.db import connection, connections, transaction

from tests.migration_connections import state_after_0001
from tulip_memory.checks.tenancy import _function_setting_errors
from tulip_memory.postgres.search_index import (
    LEXICAL_FUNCTION,
    OWNER_READ_POLICY,
    PASS_INDEX,
    WORDS_INDEX,
    AddSearchIndex,
    vector_width_sql,
)
from tulip_memory.tenancy import tenant_atomic
from tulip_memory.tenancy.cluster import is_citus

TABLE = "tulip_memory_store_item"


def _insert(tenant: str, namespace: str, *texts: str) -> None:
    with tenant_atomic(tenant), connection.cursor() as cursor:
        for index, text in enumerate(texts):
            cursor.execute(
                f"INSERT INTO {TABLE} (tenant, namespace, key, value, metadata, search_text, "
                "embedding_source, created_at, updated_at, version) "
                "VALUES (%s, %s, %s, '1', '{}', %s, '', now(), now(), 1)",
                [tenant, namespace, f"k{index}", f" {text} "],
            )


def _lexical(tenant: str, path: str, query: str) -> list[tuple[int, float]]:
    """The function's answer, called as the caller's connection calls it."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT item_id, bm25 FROM {LEXICAL_FUNCTION}(%s, %s, "
            "plainto_tsquery('english', %s), "
            "tsvector_to_array(to_tsvector('english', %s)), NULL, 1.2, 0.75, 50)",
            [tenant, path, query, query],
        )
        return cursor.fetchall()


def _words_index_scans_on_shards() -> int:
    """Scans of the words index's copies on the shards, as their nodes reported them."""
    with connections["owner"].cursor() as cursor:
        cursor.execute(
            "SELECT sum(result::bigint) FROM run_command_on_shards(%s, $$SELECT coalesce(sum("
            "pg_stat_get_numscans(indexrelid)), 0) FROM pg_index WHERE indrelid = '%%s'::regclass "
            "AND starts_with(indexrelid::regclass::text, %s)$$)",
            [TABLE, WORDS_INDEX],
        )
        return cursor.fetchone()[0]


def _until(condition, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.2)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_function_shows_the_application_role_what_its_tenant_policy_shows():
    _insert("acme", "acme/notes", "zebra crossing", "a zebra", "horses")
    _insert("globex", "globex/notes", "zebra stripes")
    # 3,000 rows of 3 KB without a zebra: reading them all costs more than the index. Row
    # by row: on Citus an INSERT ... SELECT reaches the shards by COPY, which RLS refuses.
    with tenant_atomic("acme"), connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {TABLE} (tenant, namespace, key, value, metadata, search_text, "
            "embedding_source, created_at, updated_at, version) VALUES ('acme', 'acme/notes', "
            "%s, jsonb_build_object('p', repeat('x', 3000)), '{}', %s, '', now(), now(), 1)",
            [(f"n{g}", f" note {g} ") for g in range(1, 3001)],
        )
    with connections["owner"].cursor() as cursor:  # only the owner may analyze the table
        cursor.execute(f"ANALYZE {TABLE}")
    citus = is_citus(connection)
    before = _words_index_scans_on_shards() if citus else 0
    with tenant_atomic("acme"), connection.cursor() as cursor:
        found = _lexical("acme", "acme/notes", "zebra")
        assert len(found) == 2 and all(score > 0 for _id, score in found)
        # Another tenant's namespace, named outright: nothing.
        assert _lexical("globex", "globex/notes", "zebra") == []
        # The function read the GIN index (this transaction's scans of it; on Citus the
        # scans of its shards' copies, counted once their nodes report them), which the
        # application role's own statements never can (`@@` is not leakproof).
        scans = "SELECT pg_stat_get_xact_numscans(%s::regclass)"
        cursor.execute(scans, [WORDS_INDEX])
        (read,) = cursor.fetchone()
        assert citus or read >= 1
        cursor.execute(
            f"SELECT count(*) FROM {TABLE} WHERE tenant = 'acme' AND namespace = 'acme/notes' "
            "AND search_vector @@ plainto_tsquery('english', 'zebra')"
        )
        assert cursor.fetchone() == (2,)
        cursor.execute(scans, [WORDS_INDEX])
        assert cursor.fetchone() == (read,)
        # The arguments are values, never SQL.
        assert _lexical("acme", "acme/notes' OR true --", "zebra") == []
        assert _lexical("acme' OR true --", "acme/notes", "zebra") == []
        quoted = _lexical("acme", "acme/notes", "zebra') OR true --")
        assert quoted == _lexical("acme", "acme/notes", "zebra true") == []  # two words
    if citus:
        _until(lambda: _words_index_scans_on_shards() > before, "the shard's index scans")
    with tenant_atomic("globex"):
        assert len(_lexical("globex", "globex/notes", "zebra")) == 1
        assert _lexical("acme", "acme/notes", "zebra") == []
    # No tenant bound: nothing (the policy's predicate is NULL).
    with transaction.atomic():
        assert _lexical("acme", "acme/notes", "zebra") == []
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('tulip_memory.tenant', '', true)")
        assert _lexical("acme", "acme/notes", "zebra") == []


@pytest.mark.django_db(databases=["default", "owner"])
def test_only_roles_that_may_read_the_table_may_call_the_function():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT has_function_privilege(current_user, p.oid, 'EXECUTE'), "
            "coalesce(bool_or(a.grantee = 0), false) FROM pg_proc p "
            "LEFT JOIN LATERAL aclexplode(p.proacl) a ON true WHERE p.proname = %s "
            "GROUP BY p.oid",
            [LEXICAL_FUNCTION],
        )
        assert cursor.fetchall() == [(True, False)]  # the app role may; PUBLIC may not
        cursor.execute(
            "SELECT prosecdef, proconfig, pg_get_userbyid(proowner) FROM pg_proc "
            "WHERE proname = %s",
            [LEXICAL_FUNCTION],
        )
        definer, config, owner = cursor.fetchone()
    assert definer and config == [
        "search_path=pg_catalog, pg_temp",
        "plan_cache_mode=force_custom_plan",
    ]
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (owner,)


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_the_owner_reads_every_tenant_and_writes_under_the_policy():
    _insert("acme", "acme/notes", "zebra")
    _insert("globex", "globex/notes", "zebra")
    with connection.cursor() as cursor:  # the application role, no tenant bound
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() == (0,)
    owner = connections["owner"]
    with owner.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {TABLE}")
        assert cursor.fetchone() == (2,)
        cursor.execute(
            "SELECT polcmd, pg_get_expr(polqual, polrelid), polwithcheck IS NULL, "
            "polroles = ARRAY[(SELECT relowner FROM pg_class WHERE oid = polrelid)] "
            "FROM pg_policy WHERE polname = %s",
            [OWNER_READ_POLICY],
        )
        assert cursor.fetchall() == [("r", "true", True, True)]
    # Its writes are still held to the tenant policy (FORCE): no tenant, no write.
    with owner.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET key = key || 'x' WHERE tenant = 'acme'")
        assert cursor.rowcount == 0
        cursor.execute(f"DELETE FROM {TABLE}")
        assert cursor.rowcount == 0
    with (
        pytest.raises(Exception, match="row-level security"),
        transaction.atomic(using="owner"),
        owner.cursor() as cursor,
    ):
        cursor.execute(
            f"INSERT INTO {TABLE} (tenant, namespace, key, value, metadata, search_text, "
            "embedding_source, created_at, updated_at, version) "
            "VALUES ('acme', 'acme/x', 'k', '1', '{}', '', '', now(), now(), 1)"
        )


def test_a_function_reading_another_setting_is_e019(settings):
    body = "WHERE tenant = (SELECT NULLIF(current_setting('{}', true), ''))"
    assert _function_setting_errors([body.format("tulip_memory.tenant")]) == []
    errors = _function_setting_errors([body.format("app.tenant")])
    assert [error.id for error in errors] == ["tulip_memory.E019"]
    assert "'app.tenant'" in errors[0].msg and LEXICAL_FUNCTION in errors[0].msg
    settings.TULIP_MEMORY = {"TENANT_SETTING": "app.tenant"}
    assert _function_setting_errors([body.format("app.tenant")]) == []


def _schema(owner) -> dict[str, object]:
    with owner.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'search_codes' AND NOT attisdropped), "
            "(SELECT array_agg(relname ORDER BY relname) FROM pg_class "
            "WHERE relname IN (%s, %s)), "
            "(SELECT count(*) FROM pg_policy WHERE polname = %s), "
            "(SELECT count(*) FROM pg_proc WHERE proname = %s), "
            "(SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding')",
            [TABLE, PASS_INDEX, WORDS_INDEX, OWNER_READ_POLICY, LEXICAL_FUNCTION, TABLE],
        )
        codes, indexes, policies, functions, embedding = cursor.fetchone()
    return {
        "codes": codes,
        "indexes": indexes,
        "policies": policies,
        "functions": functions,
        "embedding": embedding,
    }


MIGRATED = {
    "codes": "bit varying",
    "indexes": [PASS_INDEX, WORDS_INDEX],
    "policies": 1,
    "functions": 1,
    "embedding": "vector(1024)",
}


@pytest.mark.django_db(databases=["default", "owner"])
def test_the_operation_is_reversible():
    owner = connections["owner"]
    state = state_after_0001(owner)
    operation = AddSearchIndex("memoryitem")
    assert _schema(owner) == MIGRATED
    with owner.schema_editor() as editor:
        operation.database_backwards("tulip_memory", editor, state, state)
    assert _schema(owner) == {
        "codes": None,
        "indexes": None,
        "policies": 0,
        "functions": 0,
        "embedding": "vector(1024)",
    }
    with owner.schema_editor() as editor:
        operation.database_forwards("tulip_memory", editor, state, state)
    assert _schema(owner) == MIGRATED
    # The application role may call the function again.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT has_function_privilege(current_user, p.oid, 'EXECUTE') FROM pg_proc p "
            "WHERE proname = %s",
            [LEXICAL_FUNCTION],
        )
        assert cursor.fetchone() == (True,)


@pytest.mark.django_db(databases=["default", "owner"])
def test_the_width_statements_change_the_column_and_keep_the_codes():
    owner = connections["owner"]
    with owner.cursor() as cursor:  # in the test's transaction: rolled back afterwards
        for statement in vector_width_sql(TABLE, 8):
            cursor.execute(statement)
        cursor.execute("SET LOCAL tulip_memory.tenant = 'acme'")  # reaches Citus' workers
        cursor.execute(
            f"INSERT INTO {TABLE} (tenant, namespace, key, value, metadata, search_text, "
            "embedding, embedding_source, created_at, updated_at, version) VALUES ('acme', "
            "'acme/x', 'k', '1', '{}', '', '[1,-1,0.1,-0.1,2,-2,0,0.5]', 'e', now(), now(), 1) "
            "RETURNING search_codes::text"
        )
        # Planes: above -t, above 0, above t (t = 0.6745 / sqrt(8) of the unit vector).
        assert cursor.fetchone() == ("10111011" + "10101001" + "10001000",)
    assert _schema(owner) == {**MIGRATED, "embedding": "vector(8)"}


@pytest.mark.django_db
def test_a_missing_btree_gin_the_owner_cannot_create_fails_with_the_fix():
    import os

    from tests.migration_connections import connect, scratch_database, with_database
    from tulip_memory.exceptions import ConfigurationError
    from tulip_memory.postgres.operations import require_extension

    with scratch_database("tulip_nogin") as name:  # owned by the superuser
        owner_url = with_database(os.environ["DATABASE_OWNER_URL"], name)
        with (
            connect(owner_url, "tulip_nogin_owner") as owner,
            owner.schema_editor(atomic=False) as editor,
            pytest.raises(ConfigurationError, match=r"CREATE EXTENSION btree_gin"),
        ):
            require_extension(editor, "btree_gin", trusted=True)
        admin_url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], name)
        with (
            connect(admin_url, "tulip_nogin_admin") as admin,
            admin.schema_editor(atomic=False) as editor,
        ):
            require_extension(editor, "btree_gin", trusted=True)  # a superuser creates it
            with admin.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'btree_gin'")
                assert cursor.fetchone() == (1,)
