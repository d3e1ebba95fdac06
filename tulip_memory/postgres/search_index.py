"""The indexes PgMemory's text search reads instead of a namespace's heap rows (migration
``0014``, :class:`AddSearchIndex`, PostgreSQL only): the generated ``search_codes`` (the
unit vector in two bits a dimension), the covering :data:`PASS_INDEX`, the GIN
:data:`WORDS_INDEX`, the owner's :data:`OWNER_READ_POLICY` and the ``SECURITY DEFINER``
:data:`LEXICAL_FUNCTION`, which applies the tenant policy's own predicate itself.
Namespaces over :data:`INDEXED_NAMESPACE_MAX_BYTES` are in neither index. Why each piece
is so: docs/design/pg-search.md.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tulip_memory.postgres.operations import (
    DatabaseOnlyTableOperation,
    require_extension,
    schema_and_table,
)
from tulip_memory.postgres.rls import policy_expression

__all__ = [
    "CODES_MAX_DIMENSIONS",
    "INDEXED_NAMESPACE_MAX_BYTES",
    "LEXICAL_FUNCTION",
    "OWNER_READ_POLICY",
    "PASS_INDEX",
    "QUERY_LEVEL_OFFSET",
    "QUERY_WEIGHTS",
    "WORDS_INDEX",
    "AddSearchIndex",
    "ReplaceLexicalFunction",
    "citus_sql",
    "indexed",
    "query_planes",
    "vector_width_sql",
]

# Vectors wider than this get no codes (3 bits a dimension).
CODES_MAX_DIMENSIONS = 2000
# A namespace path of more UTF-8 bytes than this is in neither index (a btree entry holds
# 2,704 bytes: the path, the tenant (up to 1,020), the source (up to 400), the codes).
INDEXED_NAMESPACE_MAX_BYTES = 1024
PASS_INDEX = "tulip_store_item_pass"
WORDS_INDEX = "tulip_store_item_words"
OWNER_READ_POLICY = "tulip_owner_read"
LEXICAL_FUNCTION = "tulip_memory_lexical_pool"
LEXICAL_SIGNATURE = (
    "in_tenant pg_catalog.text, in_path pg_catalog.text, in_words pg_catalog.tsquery, "
    "in_lexemes pg_catalog.text[], in_now pg_catalog.timestamptz, in_k1 pg_catalog.float8, "
    "in_b pg_catalog.float8, in_pool pg_catalog.int8"
)
# The argument types, in order (the function's identity for GRANT, REVOKE and DROP).
LEXICAL_ARGUMENTS = ", ".join(argument.split()[1] for argument in LEXICAL_SIGNATURE.split(", "))
# The lexical function's schema, body and whether Citus distributes it by an argument.
_LEXICAL_STATE = """
SELECT n.nspname, p.prosrc, (p.tableoid, p.oid) IN (SELECT classid, objid
    FROM pg_catalog.pg_dist_object WHERE distribution_argument_index IS NOT NULL)
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname = %s
"""
CODES_COLUMN = "search_codes"
_STORE_TABLE = "tulip_memory_store_item"


def indexed(alias: str | None = None, *, qualified: bool = False) -> str:
    """Both indexes' predicate on the namespace column (of ``alias``); ``qualified``: named
    by schema, for the ``SECURITY DEFINER`` function's body."""
    column = "namespace" if alias is None else f"{alias}.namespace"
    if qualified:
        return _op(f"pg_catalog.octet_length({column})", "<=", str(INDEXED_NAMESPACE_MAX_BYTES))
    return f"octet_length({column}) <= {INDEXED_NAMESPACE_MAX_BYTES}"


def _op(left: str, operator: str, right: str) -> str:
    # In parentheses: operators named by schema all have the same precedence.
    return f"({left} OPERATOR(pg_catalog.{operator}) {right})"


def _codes_expression(embedding: str) -> str:
    unit = f"l2_normalize({embedding})"
    threshold = (
        f"array_fill(0.6745 / sqrt(vector_dims({embedding})), "
        f"ARRAY[vector_dims({embedding})])::vector"
    )
    planes = (f"{unit} + {threshold}", unit, f"{unit} - {threshold}")
    codes = " || ".join(f"binary_quantize({plane})::bit varying" for plane in planes)
    return f"CASE WHEN vector_dims({embedding}) <= {CODES_MAX_DIMENSIONS} THEN {codes} END"


# The query's coordinates quantised to three bits: eight levels symmetric about 0, fitted
# to a Gaussian's Lloyd-Max levels (docs/design/pg-search.md, "The query's three bits").
QUERY_WEIGHTS = (0.6595, 1.2475, 2.2485)
QUERY_LEVEL_OFFSET = -sum(QUERY_WEIGHTS) / 2
_QUERY_LEVELS = np.array(
    [
        QUERY_LEVEL_OFFSET + sum(w * ((n >> k) & 1) for k, w in enumerate(QUERY_WEIGHTS))
        for n in range(8)
    ]
)
_QUERY_THRESHOLDS = (_QUERY_LEVELS[1:] + _QUERY_LEVELS[:-1]) / 2


def query_planes(vector: np.ndarray) -> tuple[str, ...]:
    """The query's three bit planes, each repeated over a row's three planes of codes
    (docs/design/pg-search.md, "The query's three bits")."""
    q = np.asarray(vector, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    level = np.digitize(q, _QUERY_THRESHOLDS * q.std())
    return tuple(
        (np.tile((level >> bit) & 1, 3).astype(np.uint8) + ord("0")).tobytes().decode()
        for bit in range(len(QUERY_WEIGHTS))
    )


def _codes_sql(table: str, quote: Any) -> list[str]:
    return [
        f"ALTER TABLE {table} ADD COLUMN {CODES_COLUMN} bit varying "
        f"GENERATED ALWAYS AS ({_codes_expression(quote('embedding'))}) STORED",
        f"CREATE INDEX {quote(PASS_INDEX)} ON {table} (tenant, namespace) INCLUDE "
        f"(search_length, expires_at, embedding_source, id, {CODES_COLUMN}) "
        f"WHERE {indexed()}",
    ]


def vector_width_sql(table: str, width: int) -> list[str]:
    """The statements (as the owner, in one transaction) making ``table``'s vector column
    ``vector(width)``, every vector cleared; the codes depending on it are added again
    (names unquoted, as a person types them)."""
    return [
        f"ALTER TABLE {table} DROP COLUMN {CODES_COLUMN}",
        f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(width)}) USING NULL",
        *_codes_sql(table, str),
    ]


def _lexical_function_sql(
    schema: str, table: str, *, replace: bool = False, sharded: bool = False
) -> str:
    """The ``SECURITY DEFINER`` function: a namespace's ``pool`` best rows by Okapi BM25,
    with every row tied with the last (the search statement breaks ties). ``replace``:
    ``CREATE OR REPLACE``. Every name in its body is schema-qualified; it is planned at
    each call (docs/design/pg-search.md says why). ``sharded`` (Citus): the same query run
    on the tenant's shard of ``table``, on the node that holds it (:func:`citus_sql`)."""
    # The tenant policy's own predicate, on the one table in scope (the arguments' names
    # are prefixed: none is a column's).
    tenant = policy_expression(qualified=True)
    live = f"(in_now IS NULL OR i.expires_at IS NULL OR {_op('i.expires_at', '>', 'in_now')})"
    rows = " AND ".join(
        [
            _op("i.tenant", "=", "in_tenant"),
            tenant,
            _op("i.namespace", "=", "in_path"),
            indexed("i", qualified=True),
            live,
        ]
    )
    # Okapi BM25 of one lexeme of a hit: ln(1 + (N - df + 0.5) / (df + 0.5)) * tf * (k1 + 1)
    # / (tf + k1 * (1 - b + b * dl / avgdl)), evaluated in that order.
    idf = _op(
        "1", "+", _op(_op(_op("st.n", "-", "df.df"), "+", "0.5"), "/", _op("df.df", "+", "0.5"))
    )
    gain = _op(_op(f"pg_catalog.ln({idf})", "*", "h.tf"), "*", _op("in_k1", "+", "1"))
    length = _op(_op("1", "-", "in_b"), "+", _op(_op("in_b", "*", "h.dl"), "/", "st.avgdl"))
    score = _op(gain, "/", _op("h.tf", "+", _op("in_k1", "*", length)))
    create = "CREATE OR REPLACE FUNCTION" if replace or sharded else "CREATE FUNCTION"
    body = f"""WITH hits AS MATERIALIZED (
    SELECT h.id, h.dl, (h.u).lexeme AS lexeme,
        pg_catalog.array_length((h.u).positions, 1) AS tf
    FROM (SELECT i.id, i.search_length AS dl, pg_catalog.unnest(pg_catalog.ts_filter(
            pg_catalog.setweight(i.search_vector, 'A', in_lexemes), '{{a}}')) AS u
        FROM {table} i
        WHERE {_op("pg_catalog.numnode(in_words)", ">", "0")} AND {rows}
            AND {_op("i.search_vector", "@@", "in_words")}) h),
df AS MATERIALIZED (
    SELECT lexeme, pg_catalog.count(*)::pg_catalog.float8 AS df FROM hits GROUP BY lexeme),
stats AS MATERIALIZED (
    SELECT pg_catalog.count(*)::pg_catalog.float8 AS n,
        coalesce(pg_catalog.avg(i.search_length), 1)::pg_catalog.float8 AS avgdl
    FROM {table} i WHERE EXISTS (SELECT FROM hits) AND {rows})
SELECT h.id, pg_catalog.sum({score}) AS score
FROM hits h JOIN df ON {_op("df.lexeme", "=", "h.lexeme")} CROSS JOIN stats st
GROUP BY h.id ORDER BY score DESC FETCH FIRST in_pool ROWS WITH TIES"""
    language = "sql"
    if sharded:
        # The shard is a plain table of this node: its GIN index serves `@@` as on one
        # server, and no distributed query runs from the shard. The arguments stay values.
        language = "plpgsql"
        names = re.findall(r"\bin_\w+", LEXICAL_SIGNATURE)
        query = re.sub(r"\bin_\w+", lambda m: f"${names.index(m[0]) + 1}", body)
        shard = (
            f"pg_catalog.shard_name('{table}'::pg_catalog.regclass, pg_catalog."
            f"get_shard_id_for_distribution_column('{table}'::pg_catalog.regclass, in_tenant), "
            "false)"
        )
        body = (
            f"BEGIN RETURN QUERY EXECUTE pg_catalog.format($query${query.replace(table, '%1$s')}"
            f"$query$, {shard}) USING {', '.join(names)}; END"
        )
    return f"""{create} {schema}.{LEXICAL_FUNCTION}({LEXICAL_SIGNATURE})
RETURNS TABLE (item_id pg_catalog.int8, bm25 pg_catalog.float8)
LANGUAGE {language} STABLE SECURITY DEFINER ROWS 50
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $body$
{body}
$body$"""


def citus_sql(cursor: Any) -> list[str]:
    """On a Citus coordinator whose store item table is distributed: what is still to do so
    that the lexical function runs where the tenant's shard is. Its body becomes the
    ``sharded`` one, and it is distributed by ``in_tenant`` with the table, delegated
    (``force_delegation``: also inside a transaction) to the node holding the tenant;
    called from a statement routed to that node, it runs there with it."""
    cursor.execute(_LEXICAL_STATE, [LEXICAL_FUNCTION])
    found = cursor.fetchone()
    if found is None:
        return []
    schema, source, distributed = found
    quote = '"{}"'.format
    table = f"{quote(schema)}.{quote(_STORE_TABLE)}"
    replace = _lexical_function_sql(quote(schema), table, sharded=True)
    statements = [] if replace.endswith(f"$body${source}$body$") else [replace]
    if not distributed:
        statements.append(
            f"SELECT create_distributed_function('{quote(schema)}.{LEXICAL_FUNCTION}("
            f"{LEXICAL_ARGUMENTS})', 'in_tenant', colocate_with => '{_STORE_TABLE}', "
            "force_delegation => true)"
        )
    return statements


class AddSearchIndex(DatabaseOnlyTableOperation):
    """The codes, both indexes, the owner's read policy and the lexical function on the
    store item table ``model_name``. ``EXECUTE`` on the function goes only to the roles
    that may read the table; reversing keeps ``btree_gin``, other apps may use it."""

    description = "Add the search codes, indexes and lexical function of {model_name}"
    name_fragment = "search_index"

    def forwards(self, schema_editor: Any, model: Any) -> None:
        quote = schema_editor.quote_name
        schema, table = schema_and_table(schema_editor, model)
        function = f"{schema}.{LEXICAL_FUNCTION}({LEXICAL_ARGUMENTS})"
        require_extension(schema_editor, "btree_gin", trusted=True)
        for statement in [
            *_codes_sql(table, quote),
            f"CREATE INDEX {quote(WORDS_INDEX)} ON {table} USING gin "
            f"(tenant, namespace, search_vector) WHERE {indexed()}",
            f"CREATE POLICY {quote(OWNER_READ_POLICY)} ON {table} AS PERMISSIVE FOR SELECT "
            "TO CURRENT_USER USING (true)",
            _lexical_function_sql(schema, table),
            f"REVOKE ALL ON FUNCTION {function} FROM PUBLIC",
        ]:
            schema_editor.execute(statement, params=None)
        # Every role that may read the table (PUBLIC included) may call the function.
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(
                "SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
                "ELSE quote_ident(pg_get_userbyid(a.grantee)) END "
                "FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = %s::regclass "
                "AND a.privilege_type = 'SELECT' AND a.grantee <> c.relowner ORDER BY 1",
                [table],
            )
            readers = [name for (name,) in cursor.fetchall()]
        for reader in readers:
            schema_editor.execute(f"GRANT EXECUTE ON FUNCTION {function} TO {reader}", params=None)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        quote = schema_editor.quote_name
        table = quote(model._meta.db_table)
        for statement in [
            f"DROP FUNCTION IF EXISTS {LEXICAL_FUNCTION}({LEXICAL_ARGUMENTS})",
            f"DROP POLICY IF EXISTS {quote(OWNER_READ_POLICY)} ON {table}",
            f"DROP INDEX IF EXISTS {quote(WORDS_INDEX)}",
            # The covering index goes with the column.
            f"ALTER TABLE {table} DROP COLUMN IF EXISTS {CODES_COLUMN}",
        ]:
            schema_editor.execute(statement, params=None)


class ReplaceLexicalFunction(DatabaseOnlyTableOperation):
    """The lexical function of the store item table replaced by this module's (``CREATE OR
    REPLACE``: owner and grants kept; migrations 0015, 0016). Reversing keeps the new body."""

    description = "Replace the lexical search function of {model_name}"
    name_fragment = "lexical_function_ties"

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(_lexical_function_sql(schema, table, replace=True), params=None)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        """Nothing: the new body stays (see the class)."""
