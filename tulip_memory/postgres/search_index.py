"""The indexes PgMemory's text search reads instead of a namespace's heap rows.

Migration ``0014_store_item_search_index`` (:class:`AddSearchIndex`, PostgreSQL only)
adds to the store item table:

* ``search_codes``, a stored generated ``bit varying``: the unit vector coded in two bits
  a dimension (three planes: coordinate above ``-t``, above 0, above ``t``, ``t = 0.6745 /
  sqrt(d)``, the quartiles of a unit Gaussian vector's coordinates), from pgvector's
  ``binary_quantize``; NULL without a vector or over :data:`CODES_MAX_DIMENSIONS`;
* :data:`PASS_INDEX`, a covering btree ``(tenant, namespace) INCLUDE (search_length,
  expires_at, embedding_source, id, search_codes)``: an index-only pass over a namespace
  ranks its rows by their codes against the query's three bit planes
  (:func:`query_planes`: the vector candidates) and gives BM25's length statistics;
* :data:`WORDS_INDEX`, a GIN index over ``(tenant, namespace, search_vector)``
  (the trusted extension ``btree_gin``);
* :data:`OWNER_READ_POLICY`, a SELECT policy ``USING (true)`` for the migrating role (the
  tables' owner), and :data:`LEXICAL_FUNCTION`, a ``SECURITY DEFINER`` function of that
  role which returns a namespace's best rows by BM25 from the GIN index.

Why the function: under row-level security the planner uses an index only for a
leakproof operator, and ``@@`` is not one, so the application role can never read the GIN
index itself. The owner's policies include one ``USING (true)``, so inside the function
no security qual is left and the index is used; the function applies the tenant itself,
with the very predicate of the tenant policy (:func:`tulip_memory.postgres.rls.policy_expression`),
so a caller gets what the policy would show it: nothing without a tenant bound, nothing
of another tenant. A narrower owner policy (the tenant predicate) is a security qual
again, which keeps ``@@`` out of the index condition (docs/pg_store.md, "Why the owner's
read policy is USING (true)"). The owner reading every tenant's rows adds no power: it can
lift FORCE or drop the policies at will; FORCE still applies to its writes, and other
roles are not concerned by the policy.

Both indexes skip the rows of a namespace over :data:`INDEXED_NAMESPACE_MAX_BYTES` (a
btree entry holds at most 2,704 bytes): such a namespace is ranked by the statement that
reads every row. :func:`vector_width_sql` gives the statements that change the vector
column's width (the generated column depends on it).
"""

from __future__ import annotations

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
# The function's argument types, in order (its identity for GRANT, REVOKE and DROP).
LEXICAL_ARGUMENTS = (
    "pg_catalog.text, pg_catalog.text, pg_catalog.tsquery, pg_catalog.text[], "
    "pg_catalog.timestamptz, pg_catalog.float8, pg_catalog.float8, pg_catalog.int8"
)
CODES_COLUMN = "search_codes"


def indexed(alias: str | None = None, *, qualified: bool = False) -> str:
    """The condition on the namespace column (of ``alias``) of the rows both indexes hold:
    their predicate (``qualified``: its function and operator named by schema, for the
    ``SECURITY DEFINER`` function's body; the same expression to the planner)."""
    column = "namespace" if alias is None else f"{alias}.namespace"
    if qualified:
        return _op(f"pg_catalog.octet_length({column})", "<=", str(INDEXED_NAMESPACE_MAX_BYTES))
    return f"octet_length({column}) <= {INDEXED_NAMESPACE_MAX_BYTES}"


def _op(left: str, operator: str, right: str) -> str:
    """``left operator right`` with ``pg_catalog``'s operator, in parentheses (operators
    named by schema all have the same precedence)."""
    return f"({left} OPERATOR(pg_catalog.{operator}) {right})"


def _codes_expression(embedding: str) -> str:
    """``search_codes``: the three planes of the unit vector, NULL over the width limit."""
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
    """The query's three bit planes, each repeated over a row's three planes of codes.

    A row's rank is the inner product of the query's levels with its own (the number of
    its planes a coordinate is above: 0 to 3). With ``|Q and R| = (|Q| + |R| -
    hamming(Q, R)) / 2`` it is a constant minus ``sum(QUERY_WEIGHTS[k] * hamming(Q_k, R))
    / 2``, plus a multiple of the row's bit count that is zero here: the levels are
    symmetric about 0 (``QUERY_LEVEL_OFFSET = -sum(QUERY_WEIGHTS) / 2``).
    """
    q = np.asarray(vector, dtype=np.float64)
    q = q / (np.linalg.norm(q) or 1.0)
    level = np.digitize(q, _QUERY_THRESHOLDS * q.std())
    return tuple(
        (np.tile((level >> bit) & 1, 3).astype(np.uint8) + ord("0")).tobytes().decode()
        for bit in range(len(QUERY_WEIGHTS))
    )


def _codes_sql(table: str, quote: Any) -> list[str]:
    """The codes column and the covering index over them (``table`` quoted)."""
    return [
        f"ALTER TABLE {table} ADD COLUMN {CODES_COLUMN} bit varying "
        f"GENERATED ALWAYS AS ({_codes_expression(quote('embedding'))}) STORED",
        f"CREATE INDEX {quote(PASS_INDEX)} ON {table} (tenant, namespace) INCLUDE "
        f"(search_length, expires_at, embedding_source, id, {CODES_COLUMN}) "
        f"WHERE {indexed()}",
    ]


def vector_width_sql(table: str, width: int) -> list[str]:
    """The statements (as the owner, in one transaction) that make the vector column of
    the store item table ``table`` ``vector(width)``, every vector cleared (re-embedded
    afterwards by ``manage.py tulip_memory_reembed``): the generated codes depend on the
    column, so they are dropped with their index and added again."""

    def quote(name: str) -> str:
        return name

    return [
        f"ALTER TABLE {table} DROP COLUMN {CODES_COLUMN}",
        f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(width)}) USING NULL",
        *_codes_sql(table, quote),
    ]


def _lexical_function_sql(schema: str, table: str, *, replace: bool = False) -> str:
    """The ``SECURITY DEFINER`` function: a namespace's ``pool`` best rows by Okapi BM25,
    and every row tied with the last of them (which of tied rows rank first is the search
    statement's tie-break, newest-updated first: cutting ties here would pick in plan
    order). ``replace``: ``CREATE OR REPLACE`` (owner and grants kept).

    As PgMemory's search statement computes it: the rows matching the query (``words``,
    ``lexemes`` its lexemes) are the hits, tf the positions of a query lexeme in a hit's
    ``search_vector`` (cut to the query's lexemes: weighted A, only the A positions
    kept), df the hits holding it, N and the average length those of the namespace's live
    rows (computed only when there are hits). ``now`` NULL: no row has expired.

    Its search path is ``pg_catalog, pg_temp`` and its body names every table, function,
    operator and type by schema: a caller's objects (its temporary schema is the only one
    it may create in) never stand in for them. What names no operator (``NULLIF``,
    ``GROUP BY``, ``ORDER BY``) takes ``pg_catalog``'s, first on that path.

    Planned at each call with its arguments: a generic plan (PostgreSQL's choice after
    five calls in a session, or the search's own under prepared statements) does not know
    the namespace's size, and chose to filter every row of it instead of the GIN index.
    """
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
    create = "CREATE OR REPLACE FUNCTION" if replace else "CREATE FUNCTION"
    return f"""{create} {schema}.{LEXICAL_FUNCTION}(
    in_tenant pg_catalog.text, in_path pg_catalog.text, in_words pg_catalog.tsquery,
    in_lexemes pg_catalog.text[], in_now pg_catalog.timestamptz, in_k1 pg_catalog.float8,
    in_b pg_catalog.float8, in_pool pg_catalog.int8)
RETURNS TABLE (item_id pg_catalog.int8, bm25 pg_catalog.float8)
LANGUAGE sql STABLE SECURITY DEFINER ROWS 50
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $body$
WITH hits AS MATERIALIZED (
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
GROUP BY h.id ORDER BY score DESC FETCH FIRST in_pool ROWS WITH TIES
$body$"""


class AddSearchIndex(DatabaseOnlyTableOperation):
    """The codes, both indexes, the owner's read policy and the lexical function (the
    module's docstring says why), on the store item table ``model_name``.

    ``EXECUTE`` on the function is revoked from PUBLIC and granted to the roles that may
    read the table (those with SELECT on it when the migration runs, the application
    role's through default privileges): the function returns ids and scores of rows the
    caller's tenant policy shows, which a role without SELECT on the table must not read.
    A role granted SELECT later needs ``GRANT EXECUTE ON FUNCTION`` too (docs/pg_store.md).
    ``btree_gin`` is a trusted extension: a role with CREATE on the database (its owner)
    creates it, otherwise a superuser must (:func:`tulip_memory.postgres.roles.
    database_setup_sql` does); reversing keeps it, as other apps may use it. Not part
    of the model state (the ORM never reads these); other vendors get nothing.
    """

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

    def describe(self) -> str:
        return f"Add the search codes, indexes and lexical function of {self.model_name}"

    @property
    def migration_name_fragment(self) -> str:
        return "search_index"


class ReplaceLexicalFunction(DatabaseOnlyTableOperation):
    """The lexical function of the store item table ``model_name`` replaced by this
    module's (``CREATE OR REPLACE``: its owner and grants kept), run by the function's
    owner, the migrating role. Migration ``0015`` keeps the rows tied at the pool's end
    with it, ``0016`` names every function and operator of its body by schema. Reversing
    keeps the new body: the ones before differ only in cutting ties in plan order and in
    naming functions and operators through the pinned search path. PostgreSQL only."""

    def forwards(self, schema_editor: Any, model: Any) -> None:
        schema, table = schema_and_table(schema_editor, model)
        schema_editor.execute(_lexical_function_sql(schema, table, replace=True), params=None)

    def backwards(self, schema_editor: Any, model: Any) -> None:
        """Nothing: the new body stays (see the class)."""

    def describe(self) -> str:
        return f"Replace the lexical search function of {self.model_name}"

    @property
    def migration_name_fragment(self) -> str:
        return "lexical_function_ties"
