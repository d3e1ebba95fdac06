"""PgMemory's search: one statement ranking each namespace path of a tenant on its own.

:func:`search_paths` builds and runs it over a :class:`~tulip_memory.models.store.MemoryItem`
queryset (inside ``tenant_atomic``: row-level security hides the other tenants' rows).
The design is in docs/design/pg-search.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from tulip_memory.core.namespaces import NAMESPACE_SEPARATOR
from tulip_memory.models.store import MemoryItemQuerySet
from tulip_memory.postgres.search_index import (
    CODES_MAX_DIMENSIONS,
    INDEXED_NAMESPACE_MAX_BYTES,
    LEXICAL_FUNCTION,
    QUERY_WEIGHTS,
    indexed,
    query_planes,
)

__all__ = [
    "INDEXED_SEARCH_MIN_ROWS",
    "PASS_POOL",
    "SearchRow",
    "SearchRows",
    "live_predicate",
    "search_paths",
]


class SearchRow(NamedTuple):
    """One hit of :func:`search_paths`."""

    position: int
    key: str
    value: Any
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int
    lexical: bool
    rank: float
    namespace: str = ""
    has_ttl: bool = False  # written with a ttl (a read may refresh its expiry)


class SearchRows(list[SearchRow]):
    """The hits of :func:`search_paths`, in order.

    ``namespace_rows`` maps the position of each path whose text query was ranked by
    reading its rows, with ``count_rows``, to how many live rows it has — a path without
    a hit too; the other paths (from the indexes, not counted, other modes) are absent.
    """

    def __init__(self) -> None:
        super().__init__()
        self.namespace_rows: dict[int, int] = {}


# The query's lexemes, once for every namespace of the statement: its tokens analysed by
# the text search configuration (stemmed, stop words dropped), as an array and as the
# OR of them all.
QUERY_LEXEMES = (
    "WITH q AS (SELECT tsvector_to_array(v) AS lexemes, "
    "coalesce(replace(strip(v)::text, ' ', ' | '), '')::tsquery AS tsq "
    "FROM (SELECT to_tsvector(%(config)s::regconfig, %(query)s) AS v) t) "
)


# The vector candidates of a text query in a namespace: the best PASS_POOL rows of the
# index-only pass over the codes (search_index), re-ranked by exact cosine distance. A
# namespace of at most this many rows is therefore ranked exactly; over it, the pass kept
# the exact top 10 in 0.998 of 400 queries on isotropic random vectors in a 50k-row
# namespace (the hardest case: docs/pg_store.md, "Exact search at 50k rows").
PASS_POOL = 1000

# The pass's cut: in a namespace known to hold more than PASS_CUT_MARGIN * 2 * pass_pool
# rows, its first PASS_SAMPLE_ROWS index entries are ranked first, and only the rows
# ranking at least as well as the best PASS_CUT_MARGIN * pass_pool / rows of that sample
# go on to the pass's sort (about PASS_CUT_MARGIN * pass_pool rows): sorting all 50,000
# entries of a namespace was a quarter of the pass (the cut saves 1.2-1.5 ms of a 15 ms
# statement: docs/pg_store.md, "The pass's cut"). At least pass_pool rows passing, the
# best pass_pool are the same as without the cut. The sample is the namespace's oldest
# rows (index order): should the newer ones rank otherwise (or the namespace have shrunk
# since it was counted), fewer may pass; then the pass runs again without the cut. A
# namespace found to hold fewer rows than the sample is not cut.
PASS_SAMPLE_ROWS = 2048
PASS_CUT_MARGIN = 8

# PgMemory ranks a namespace from the indexes once it has seen it hold at least this many
# rows (SearchRows.namespace_rows): below it, reading the rows costs less than the lexical
# function's call and re-ranking the pass's rows by primary key (bench/pg_store.py, 384-d:
# 2.8 against 3.9 ms at 1k rows, 12.2 against 7.0 at 10k; bench/manager.py, four
# namespaces of 2,500 rows of 1,024-d vectors: 18.8 against 29.4 ms).
INDEXED_SEARCH_MIN_ROWS = 5000


def live_predicate(alias: str, column: str, parameter: str = "now") -> str:
    """The SQL condition keeping the rows of ``alias`` not expired at ``%(parameter)s``."""
    return f"({alias}.{column} IS NULL OR {alias}.{column} > %({parameter})s)"


def search_paths(
    items: MemoryItemQuerySet,
    tenant: str,
    paths: Sequence[str],
    limit: int,
    *,
    vector: np.ndarray | str | None = None,
    source: str | None = None,
    terms: Sequence[str] | None = None,
    config: str = "english",
    weight: float = 0.0,
    bm25: tuple[float, float] = (0.0, 0.0),
    max_distance: float | None = None,
    metadata: dict[str, Any] | None = None,
    subtree: bool = False,
    value_condition: Callable[[str], tuple[str, dict[str, Any]]] | None = None,
    now: datetime | None = None,
    pass_pool: int = PASS_POOL,
    use_indexes: bool | Sequence[bool] = True,
    count_rows: bool | Sequence[bool] = False,
    known_rows: Sequence[int | None] | None = None,
    vector_candidates: bool = True,
) -> SearchRows:
    """Rank each namespace path of ``tenant`` on its own, in ONE statement.

    Without ``query`` nor ``vector``: newest-updated first, ties by key (the
    ``recent`` index). With ``vector`` only (``search_by_embedding``): one pass over
    the namespace's rows (the ``(tenant, namespace)`` btree) gives each row with a
    vector (from ``source``; from any source when it is None) its exact cosine
    distance, the rank. With ``terms`` (the query's tokens; :func:`_hybrid` explains
    the ranking, ``bm25`` is its ``(k1, b)``, ``weight`` the vector's part): words and
    vector fused, rank = minus the fused score. Only ids and
    ranks are computed over the namespace; the k best are kept (an exact sort: the
    true top-k, never an ANN approximation) and only those k rows are read in full
    (with a query, the tie-break columns of the candidate pools too).
    Ties: newest-updated first, then key.

    ``max_distance`` keeps the rows whose distance is at most it; ``metadata`` the rows
    whose metadata has each of its fields equal (as JSON) to its value. Both are
    applied before the cut to ``limit`` (vector ranking only). ``now``: only the rows
    not expired at that time take part (every row when None).

    ``subtree`` ranks each path together with the namespaces under it (one ranking per
    path, over all their rows); ``value_condition(column)`` returns an SQL condition
    on the ``value`` column (named ``column``) and its parameters, applied before the
    ranking, in every mode. Each row names its namespace path (``SearchRow.namespace``).

    ``vector_candidates`` False (a text query): the vector only re-ranks the rows that
    match the query's words, none is found by its vector alone — for vectors that
    carry nothing but the words (HRR: a row sharing no word with the query is at a
    random distance from it, and filled the results with noise). Only the matching
    rows' distances are computed.

    ``vector`` is best a float32 array: it travels in binary rather than being
    printed as text and parsed back; pgvector's text form is accepted too.

    A text query without ``subtree``, ``value_condition`` nor ``metadata`` (which need
    every row) reads the indexes of :mod:`tulip_memory.postgres.search_index` instead of a
    namespace's rows, when its vector (an array) has codes and every path fits the
    indexes (:func:`_hybrid_indexed` says how): for every path (``use_indexes``
    True), none (False), or those whose item of ``use_indexes`` is true (a branch for
    each, the other never run: :func:`_per_path`). Both give the same results for a
    namespace of at most ``pass_pool`` rows; ``SearchRows.namespace_rows`` says how many
    rows were ranked. ``known_rows``, one a path (None: unknown), is how many rows a
    caller last saw in each namespace: from the indexes, the vector pass of one known
    to be large sorts only the rows that pass a cut (:data:`PASS_SAMPLE_ROWS`).
    """
    n = items.sql_names()
    params: dict[str, Any] = {
        "tenant": tenant,
        "paths": list(paths),
        "limit": limit,
        "indexed": _chosen_paths(use_indexes, len(paths)),
        "counted": _chosen_paths(count_rows, len(paths)),
        "cuts": _sample_cuts(known_rows, len(paths), max(pass_pool, 5 * limit, 50)),
    }
    in_path = f"c.{n['namespace']} = p.path"
    if subtree:
        in_path = f"({in_path} OR starts_with(c.{n['namespace']}, p.path || %(separator)s))"
        params["separator"] = NAMESPACE_SEPARATOR
    conditions = [f"c.{n['tenant']} = %(tenant)s", in_path]
    if value_condition is not None:
        condition, condition_params = value_condition(f"c.{n['value']}")
        conditions.append(condition)
        params.update(condition_params)
    for index, (field, expected) in enumerate((metadata or {}).items()):
        params[f"meta_field_{index}"] = field
        params[f"meta_value_{index}"] = json.dumps(expected)
        conditions.append(
            f"c.{n['metadata']} -> %(meta_field_{index})s::text = %(meta_value_{index})s::jsonb"
        )
    # Expiry (TTL): ONE condition, apart from the ranking — whatever the statement
    # below becomes, an expired row never takes part in it.
    if now is not None:
        params["now"] = now
        conditions.append(live_predicate("c", n["expires_at"]))
    usable = f"c.{n['embedding']} IS NOT NULL"
    if source is not None:
        params["source"] = source
        usable = f"(c.{n['embedding_source']} = %(source)s AND {usable})"
    if vector is not None:
        params["vector"] = vector
    prefix = ""
    if terms is not None:
        params.update(query=" ".join(terms), config=config, weight=weight, k1=bm25[0], b=bm25[1])
        prefix = QUERY_LEXEMES
        where = " AND ".join(conditions)
        whole = _hybrid(n, where, usable, vector is not None, params, candidates=vector_candidates)
        if any(params["indexed"]) and _indexes_serve(
            paths, vector, subtree, value_condition, metadata
        ):
            indexed_ranking = _hybrid_indexed(
                n, where, usable, params, pass_pool, candidates=vector_candidates
            )
            ranked = _per_path(whole, indexed_ranking, params["indexed"])
        else:
            ranked = whole
    elif vector is None:
        ranked = (
            f"SELECT c.{n['id']} AS id, 0.0::float8 AS rank, false AS lexical "
            f"FROM {n['table']} c WHERE {' AND '.join(conditions)} "
            f"ORDER BY c.{n['updated_at']} DESC, c.{n['key']} LIMIT %(limit)s"
        )
    else:
        # The "+ 0" keeps the value but is no expression an HNSW index orders by:
        # under a selective tenant/namespace filter an ANN scan returns too few or
        # wrong rows, so the planner must sort exactly instead.
        conditions.append(usable)
        keep = ""
        if max_distance is not None:
            params["max_distance"] = max_distance
            keep = "WHERE r.rank <= %(max_distance)s"
        ranked = (
            "SELECT r.id, r.rank, false AS lexical FROM ("
            f"SELECT c.{n['id']} AS id, c.{n['updated_at']} AS updated_at, "
            f"c.{n['key']} AS key, (c.{n['embedding']} <=> %(vector)s::vector) + 0 AS rank "
            f"FROM {n['table']} c WHERE {' AND '.join(conditions)}"
            f") r {keep} ORDER BY r.rank, r.updated_at DESC, r.key LIMIT %(limit)s"
        )
    sql = prefix + (
        f"SELECT p.idx, i.{n['key']}, i.{n['value']}, i.{n['metadata']}, "
        f"i.{n['created_at']}, i.{n['updated_at']}, i.{n['version']}, m.lexical, m.rank, "
        f"i.{n['namespace']}, i.{n['ttl']} IS NOT NULL, "
        f"{'m.seen' if terms is not None else 'NULL::bigint'} "
        "FROM unnest(%(paths)s::text[], %(indexed)s::bool[], %(counted)s::bool[], "
        "%(cuts)s::int[]) WITH ORDINALITY AS p(path, indexed, counted, cut, idx) "
        f"CROSS JOIN LATERAL ({ranked}) m "
        # LEFT: a counted path without a hit gives one row, its count (no id).
        f"LEFT JOIN {n['table']} i ON i.{n['id']} = m.id "
        f"ORDER BY p.idx, m.rank, i.{n['updated_at']} DESC, i.{n['key']}"
    )
    with items.binary_cursor() as cursor:
        if cursor.cursor.connection.prepare_threshold is not None:
            # The alias allows prepared statements (OPTIONS["prepare_threshold"]):
            # psycopg prepares this one after that many runs, and it is planned
            # once, generically — every plan of it visits the namespace's rows the
            # same way, and planning and parsing were ~40% of a 100-row search.
            cursor.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _search_rows(rows)


def _hybrid(
    n: dict[str, str],
    where: str,
    usable: str,
    with_vector: bool,
    params: dict[str, Any],
    *,
    candidates: bool,
) -> str:
    """The per-namespace ranking of a text query (the inner part of the statement).

    One pass over the namespace's rows (the ``(tenant, namespace)`` btree) gives each
    its length, its tsvector if it matches a query lexeme and its distance to the
    query vector if it has a usable one; the rest works on that pass's result.
    Lexical part: Okapi BM25 over the generated ``search_vector`` (migration 0006).
    The namespace's rows matching any query lexeme (``QUERY_LEXEMES``) are its hits;
    each hit's tf is the number of positions of a lexeme in its tsvector (which
    ``to_tsvector`` always records), df the number of hits holding it,
    N and the average length are the namespace's; the ``pool`` best are kept. Vector
    part: the ``pool`` nearest rows by exact cosine distance among those with a
    usable vector (with ``candidates``; otherwise no such pool, and only the rows
    matching a query lexeme get a distance). Fused over the union of both pools:
    ``bm25 / best_bm25 + weight * (1 - distance)`` (a row without a usable vector gets
    0 for the second term, and is flagged ``lexical``). Without a query vector the
    lexical part ranks alone. The tie-break columns (``updated_at``, ``key``) are read
    only for the pooled rows that can still make the top ``limit``.

    This statement reads every row of the namespace; `:func:`_hybrid_indexed` ranks the
    same way from the indexes, for the searches they can serve.
    """
    params["pool"] = max(50, 5 * params["limit"])
    table, id_ = n["table"], n["id"]
    distance = "NULL::float8"
    if with_vector:
        matching = "" if candidates else " AND c.search_vector @@ (SELECT tsq FROM q)"
        distance = (
            f"CASE WHEN {usable}{matching} THEN c.{n['embedding']} <=> %(vector)s::vector END"
        )
    parts = [
        # ONE pass over the namespace's rows: each row's length, its tsvector when it
        # matches a query lexeme, its distance when it has a usable vector. Nothing
        # else: each column kept here is copied for every row, at every read of the
        # CTE. The query's tsquery is a one-time parameter, not a join per row.
        f"scan AS MATERIALIZED (SELECT c.{id_} AS id, c.search_length AS dl, "
        "CASE WHEN c.search_vector @@ (SELECT tsq FROM q) THEN c.search_vector END AS sv, "
        f"{distance} AS distance FROM {table} c WHERE {where})",
        "stats AS MATERIALIZED (SELECT count(*)::float8 AS n, "
        "coalesce(avg(dl), 1)::float8 AS avgdl FROM scan)",
        # Each hit's tsvector cut to the query's lexemes (weighted A, then only the A
        # positions kept: the generated search_vector has positions, all of weight D),
        # unnested in the select list: one lexeme of the query per row.
        "hits AS MATERIALIZED (SELECT h.id, (h.u).lexeme AS lexeme, h.dl, h.distance, "
        "array_length((h.u).positions, 1) AS tf FROM (SELECT s.id, s.dl, "
        "s.distance, unnest(ts_filter(setweight(s.sv, 'A', (SELECT lexemes FROM q)), "
        "'{a}')) AS u FROM scan s WHERE s.sv IS NOT NULL) h)",
        "df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme)",
        "lexical AS MATERIALIZED (SELECT h.id, min(h.distance) AS distance, "
        "sum(ln(1 + (st.n - df.df + 0.5) "
        "/ (df.df + 0.5)) * h.tf * (%(k1)s + 1) / (h.tf + %(k1)s * (1 - %(b)s + %(b)s "
        "* h.dl / st.avgdl))) AS score FROM hits h JOIN df USING (lexeme) "
        # Every row tied with the pool's last: the tie-break (newest first) is _fused's.
        "CROSS JOIN stats st GROUP BY h.id ORDER BY score DESC "
        "FETCH FIRST %(pool)s ROWS WITH TIES)",
    ]
    pooled = "SELECT id, score, distance FROM lexical"
    if with_vector and candidates:
        parts.append(
            "semantic AS (SELECT id, distance FROM scan "
            "WHERE distance IS NOT NULL ORDER BY distance FETCH FIRST %(pool)s ROWS WITH TIES)"
        )
        pooled += " UNION ALL SELECT id, NULL, distance FROM semantic"
    # Both pools, one row per item: its BM25 (NULL outside the lexical pool) and its
    # distance (NULL without a usable vector).
    parts.append(
        "pooled AS MATERIALIZED (SELECT b.id, max(b.score) AS score, min(b.distance) AS "
        f"distance FROM ({pooled}) b GROUP BY b.id)"
    )
    # The namespace's live rows, for the paths that ask (counting them costs a pass
    # over the rows read when no row matches a word, or ~2.7 ms a search of four
    # namespaces of 2,500 rows).
    counted = any(params["counted"])  # else no count, nor its row for a path without hits
    return _fused(n, parts, "(SELECT n::bigint FROM stats)" if counted else None)


def _per_path(whole: str, indexed_ranking: str, chosen: list[bool]) -> str:
    """``indexed_ranking`` for the paths ``chosen`` marks, ``whole`` (the ranking
    reading every row) for the others; both when they differ, each behind a filter
    on the path's mark, which PostgreSQL evaluates once a path (a one-time filter):
    the branch it rules out is planned but never run."""
    if all(chosen):
        return indexed_ranking
    return (
        f"SELECT w.* FROM ({whole}) w WHERE NOT p.indexed UNION ALL "
        f"SELECT x.* FROM ({indexed_ranking}) x WHERE p.indexed"
    )


def _hybrid_indexed(
    n: dict[str, str],
    where: str,
    usable: str,
    params: dict[str, Any],
    pass_pool: int,
    *,
    candidates: bool,
) -> str:
    """:func:`_hybrid`'s ranking from the indexes (:mod:`tulip_memory.postgres.search_index`).

    Lexical part: the ``pool`` best rows by BM25, computed as :func:`_hybrid` does, from
    the GIN index of the words through the ``SECURITY DEFINER`` function (the only way
    the application role can use that index under row-level security: it applies the
    tenant policy's predicate itself); their distances are read by primary key.
    Vector part: an index-only pass over the codes of the namespace's rows with a
    vector of the query's source keeps the ``pass_pool`` best by the query's three
    bit planes (:func:`query_planes`), and those are re-ranked by exact cosine
    distance, the ``pool`` nearest kept: the exact ones whenever the namespace has at
    most ``pass_pool`` rows. In a path with a cut (``p.cut``, the place in the ranked
    sample of its first :data:`PASS_SAMPLE_ROWS` entries), only the rows ranking at
    least as well as that sample row are sorted, and the pass runs again without the
    cut when fewer than ``pass_pool`` got through. Without ``candidates``, no pass: the
    vector only re-ranks the lexical candidates. Fused as :func:`_hybrid` fuses.
    """
    params["pool"] = max(50, 5 * params["limit"])
    params["lexical_now"] = params.get("now")
    table, id_ = n["table"], n["id"]
    with_vector = "vector" in params
    distance = "NULL::float8"
    if with_vector:
        distance = f"CASE WHEN {usable} THEN c.{n['embedding']} <=> %(vector)s::vector END"
    parts = [
        "lexical AS MATERIALIZED (SELECT l.item_id AS id, l.bm25 AS score "
        f"FROM {LEXICAL_FUNCTION}(%(tenant)s, p.path, (SELECT tsq FROM q), "
        "(SELECT lexemes FROM q), %(lexical_now)s::timestamptz, %(k1)s, %(b)s, "
        "%(pool)s) l)",
        # Each lexical candidate's distance (NULL without a usable vector), looked up
        # by primary key (LIMIT 1: one lookup per row, never a whole-table join).
        "worded AS MATERIALIZED (SELECT l.id, l.score, d.distance FROM lexical l "
        f"CROSS JOIN LATERAL (SELECT {distance} AS distance FROM {table} c "
        f"WHERE c.{id_} = l.id LIMIT 1) d)",
    ]
    pooled = "SELECT id, score, distance FROM worded"
    if with_vector and candidates:
        planes = query_planes(params["vector"])
        for k, (plane, weight) in enumerate(zip(planes, QUERY_WEIGHTS, strict=True)):
            params[f"plane{k}"], params[f"weight{k}"] = plane, weight
        params["pass_pool"] = max(pass_pool, params["pool"])
        coded = f"c.search_codes IS NOT NULL AND {indexed('c')}"
        if "source" in params:
            coded = f"c.{n['embedding_source']} = %(source)s AND {coded}"
        # The codes are a bit string a row, ranked by the query's planes: a sum of
        # Hamming distances, from the covering index alone.
        closeness = " + ".join(
            f"%(weight{k})s * (c.search_codes <~> %(plane{k})s::varbit)"
            for k in range(len(QUERY_WEIGHTS))
        )
        whole_pass = (
            f"SELECT c.{id_} AS id FROM {table} c WHERE {where} AND {coded} "
            f"ORDER BY {closeness} LIMIT %(pass_pool)s"
        )
        if not any(cut is not None for cut in params["cuts"]):
            # No path with a cut: none of its statement (planning it costs ~0.2 ms).
            parts.append(f"passed AS MATERIALIZED ({whole_pass})")
        else:
            parts += [
                # Read only for a path with a cut.
                f"sample AS MATERIALIZED (SELECT {closeness} AS closeness FROM {table} c "
                f"WHERE {where} AND {coded} LIMIT {PASS_SAMPLE_ROWS})",
                f"cut_pass AS MATERIALIZED (SELECT c.{id_} AS id FROM {table} c "
                # Without a cut, the OR stops at its first term: the closeness is not
                # computed twice a row.
                f"WHERE {where} AND {coded} AND (p.cut IS NULL OR {closeness} <= "
                f"(SELECT CASE WHEN count(*) = {PASS_SAMPLE_ROWS} THEN coalesce((array_agg("
                "closeness ORDER BY closeness))[p.cut + 1], 'Infinity') ELSE 'Infinity' "
                f"END FROM sample)) ORDER BY {closeness} LIMIT %(pass_pool)s)",
                # Fewer rows than the pass keeps got through the cut (the sample
                # misjudged the share): the pass again without it. Each branch behind
                # a one-time filter: only one runs.
                "passed AS (SELECT id FROM cut_pass WHERE p.cut IS NULL OR (SELECT "
                "count(*) FROM cut_pass) >= %(pass_pool)s UNION ALL "
                f"(SELECT * FROM ({whole_pass}) w WHERE p.cut IS NOT NULL AND (SELECT "
                "count(*) FROM cut_pass) < %(pass_pool)s))",
            ]
        parts += [
            f"semantic AS (SELECT c.{id_} AS id, c.{n['embedding']} <=> %(vector)s::vector "
            f"AS distance FROM {table} c WHERE c.{id_} IN (SELECT id FROM passed) "
            "ORDER BY distance FETCH FIRST %(pool)s ROWS WITH TIES)",
        ]
        pooled += " UNION ALL SELECT id, NULL, distance FROM semantic"
    parts.append(
        "pooled AS MATERIALIZED (SELECT b.id, max(b.score) AS score, min(b.distance) AS "
        f"distance FROM ({pooled}) b GROUP BY b.id)"
    )
    # How many rows the namespace holds is not counted here: that would read them.
    return _fused(n, parts, None)


def _chosen_paths(marks: bool | Sequence[bool], count: int) -> list[bool]:
    """Which of ``count`` paths ``marks`` (one for all, or one a path) marks."""
    if isinstance(marks, bool):
        return [marks] * count
    chosen = [bool(mark) for mark in marks]
    if len(chosen) != count:
        raise ValueError(f"{len(chosen)} marks for the {count} paths of the search")
    return chosen


def _sample_cuts(
    known_rows: Sequence[int | None] | None, count: int, pass_pool: int
) -> list[int | None]:
    """Each path's cut (:data:`PASS_SAMPLE_ROWS`): the place in its ranked sample of the
    worst row that still passes, for a namespace known to hold more than twice the
    margin's rows; None for the others (all rows sorted)."""
    if known_rows is None:
        return [None] * count
    if len(known_rows) != count:
        raise ValueError(f"{len(known_rows)} row counts for the {count} paths of the search")
    kept = PASS_CUT_MARGIN * pass_pool
    return [
        None if rows is None or rows <= 2 * kept else PASS_SAMPLE_ROWS * kept // rows
        for rows in known_rows
    ]


def _indexes_serve(
    paths: Sequence[str],
    vector: np.ndarray | str | None,
    subtree: bool,
    value_condition: Any,
    metadata: dict[str, Any] | None,
) -> bool:
    """Whether a text query over ``paths`` can be ranked from the search indexes: no
    condition that needs the rows, a vector (if any) given as an array with codes, every
    path short enough to be indexed."""
    if subtree or value_condition is not None or metadata:
        return False
    if vector is not None and not (
        isinstance(vector, np.ndarray) and vector.shape[-1] <= CODES_MAX_DIMENSIONS
    ):
        return False
    return all(len(path.encode()) <= INDEXED_NAMESPACE_MAX_BYTES for path in paths)


def _fused(n: dict[str, str], parts: list[str], count: str | None) -> str:
    """The fused ranking over ``parts``' ``pooled`` CTE (``id``, BM25 ``score``: NULL
    outside the lexical pool, ``distance``: NULL without a usable vector), best first.

    ``count``, the SQL of the namespace's live rows (None: not known here), is the
    ``seen`` column of every row of a path marked ``counted``; such a path without a hit
    gives one row of its own, with that count and no id."""
    table, id_ = n["table"], n["id"]
    fused = (
        # The fused score of each pooled row, computed once: the cut below compares these
        # very values.
        "fused AS MATERIALIZED (SELECT u.id, u.distance IS NULL AS lexical, "
        "coalesce(u.score / nullif(max(u.score) OVER (), 0), 0) "
        "+ %(weight)s * coalesce(1.0 - u.distance, 0.0) AS score FROM pooled u)"
    )
    seen = "NULL::bigint" if count is None else f"CASE WHEN p.counted THEN {count} END"
    ranked = (
        f"SELECT f.id, -f.score AS rank, f.lexical, {seen} AS seen FROM fused f "
        # The tie-break columns, looked up by primary key (LIMIT 1: one lookup per row,
        # never a join the planner could turn into a whole-table scan), for the rows
        # scoring at least the limit-th best score only: a row below it cannot make the
        # top ``limit``, whatever its tie-break.
        f"CROSS JOIN LATERAL (SELECT r.{n['updated_at']} AS updated_at, r.{n['key']} AS key "
        f"FROM {table} r WHERE r.{id_} = f.id LIMIT 1) t "
        "WHERE f.score >= (SELECT min(x.score) FROM (SELECT score FROM fused "
        "ORDER BY score DESC LIMIT %(limit)s) x) "
        "ORDER BY f.score DESC, t.updated_at DESC, t.key LIMIT %(limit)s"
    )
    if count is not None:
        ranked = (
            f"({ranked}) UNION ALL SELECT NULL::bigint, NULL::float8, NULL::boolean, {count} "
            "WHERE p.counted AND NOT EXISTS (SELECT FROM fused)"
        )
    return f"WITH {', '.join([*parts, fused])} {ranked}"


def _search_rows(rows: Sequence[tuple[Any, ...]]) -> SearchRows:
    """The search statement's rows as :class:`SearchRows`."""
    found = SearchRows()
    for (
        idx,
        key,
        value,
        meta,
        created,
        updated,
        version,
        lexical,
        rank,
        path,
        has_ttl,
        seen,
    ) in rows:
        if seen is not None:
            found.namespace_rows[int(idx) - 1] = int(seen)
        if key is None:  # a counted path without a hit: its count only
            continue
        found.append(
            SearchRow(
                int(idx) - 1,
                key,
                _json(value),
                _json(meta),
                created,
                updated,
                version,
                lexical,
                float(rank),
                path,
                has_ttl,
            )
        )
    return found


def _json(value: Any) -> Any:
    # Django's psycopg configuration loads jsonb as text (JSONField parses it).
    return json.loads(value) if isinstance(value, str) else value
