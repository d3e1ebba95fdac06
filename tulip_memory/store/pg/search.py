"""PgMemory's search: one statement ranking each namespace path of a tenant on its own.

:func:`search_paths` builds and runs it over a :class:`~tulip_memory.models.store.MemoryItem`
queryset (inside ``tenant_atomic``: row-level security hides the other tenants' rows).
The design is in docs/design/pg-search.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from django.db import connections

from tulip_memory.core.namespaces import NAMESPACE_SEPARATOR
from tulip_memory.postgres.search_index import (
    CODES_MAX_DIMENSIONS,
    INDEXED_NAMESPACE_MAX_BYTES,
    LEXICAL_FUNCTION,
    QUERY_WEIGHTS,
    indexed,
    query_planes,
)
from tulip_memory.store.ranking import candidate_pool
from tulip_memory.tenancy.cluster import is_citus

if TYPE_CHECKING:
    from tulip_memory.models.store import MemoryItemQuerySet

__all__ = [
    "INDEXED_SEARCH_MIN_ROWS",
    "PASS_POOL",
    "SearchRow",
    "SearchRows",
    "search_paths",
]


class SearchRow(NamedTuple):
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
    """The hits of :func:`search_paths`, in order; ``namespace_rows``: path position ->
    live rows, for the paths ranked by reading their rows with ``count_rows``."""

    def __init__(self) -> None:
        super().__init__()
        self.namespace_rows: dict[int, int] = {}


# The query's lexemes (stemmed, stop words dropped), once for every namespace of the
# statement, as an array and as the OR of them all.
QUERY_LEXEMES = (
    "WITH q AS (SELECT tsvector_to_array(v) AS lexemes, "
    "coalesce(replace(strip(v)::text, ' ', ' | '), '')::tsquery AS tsq "
    "FROM (SELECT to_tsvector(%(config)s::regconfig, %(query)s) AS v) t) "
)


# The vector candidates of a text query in a namespace: the best PASS_POOL rows of the
# index-only pass over the codes, re-ranked by exact cosine distance.
PASS_POOL = 1000

# The pass's cut (docs/design/pg-search.md, "The pass's cut"): in a large namespace only
# the rows ranking as well as the best PASS_CUT_MARGIN * pass_pool / rows of its first
# PASS_SAMPLE_ROWS entries go on to the sort; too few passing, the pass runs again uncut.
PASS_SAMPLE_ROWS = 2048
PASS_CUT_MARGIN = 8

# PgMemory ranks a namespace from the indexes once it has seen it hold this many rows;
# below it, reading the rows costs less (docs/benchmarks.md).
INDEXED_SEARCH_MIN_ROWS = 5000


# The statements, named by what they rank; ``{where}``: a path's rows; ``p``: the path.
# Every read of the table names the tenant, also where the row id alone would do: on Citus
# that makes the statement one shard's (a router query).
SEARCH = (
    "SELECT p.idx, i.key, i.value, i.metadata, i.created_at, i.updated_at, i.version, "
    "m.lexical, m.rank, i.namespace, i.ttl IS NOT NULL, {seen} "
    "FROM unnest(%(paths)s::text[], %(indexed)s::bool[], %(counted)s::bool[], "
    "%(cuts)s::int[]) WITH ORDINALITY AS p(path, indexed, counted, cut, idx) "
    "CROSS JOIN LATERAL ({ranked}) m "
    # LEFT: a counted path without a hit gives one row, its count (no id).
    "LEFT JOIN tulip_memory_store_item i ON i.tenant = %(tenant)s AND i.id = m.id "
    "ORDER BY p.idx, m.rank, i.updated_at DESC, i.key"
)
RECENT = (
    "SELECT c.id AS id, 0.0::float8 AS rank, false AS lexical "
    "FROM tulip_memory_store_item c WHERE {where} "
    "ORDER BY c.updated_at DESC, c.key LIMIT %(limit)s"
)
# The "+ 0" keeps the value but is no expression an HNSW index orders by: under a
# selective tenant/namespace filter an ANN scan returns too few or wrong rows.
NEAREST = (
    "SELECT r.id, r.rank, false AS lexical FROM (SELECT c.id AS id, "
    "c.updated_at AS updated_at, c.key AS key, (c.embedding <=> %(vector)s::vector) + 0 "
    "AS rank FROM tulip_memory_store_item c WHERE {where}) r {keep} "
    "ORDER BY r.rank, r.updated_at DESC, r.key LIMIT %(limit)s"
)
DISTANCE = "CASE WHEN {usable} THEN c.embedding <=> %(vector)s::vector END"
# The ranking that reads every row of the path (docs/design/pg-search.md, "Ranking").
WHOLE_CTES = (
    # One pass over the rows; each column kept here is copied for every row.
    "scan AS MATERIALIZED (SELECT c.id AS id, c.search_length AS dl, "
    "CASE WHEN c.search_vector @@ (SELECT tsq FROM q) THEN c.search_vector END AS sv, "
    "{distance} AS distance FROM tulip_memory_store_item c WHERE {where})",
    "stats AS MATERIALIZED (SELECT count(*)::float8 AS n, "
    "coalesce(avg(dl), 1)::float8 AS avgdl FROM scan)",
    # Weighted A, then only the A positions kept: the tsvector cut to the query's lexemes.
    "hits AS MATERIALIZED (SELECT h.id, (h.u).lexeme AS lexeme, h.dl, h.distance, "
    "array_length((h.u).positions, 1) AS tf FROM (SELECT s.id, s.dl, "
    "s.distance, unnest(ts_filter(setweight(s.sv, 'A', (SELECT lexemes FROM q)), "
    "'{{a}}')) AS u FROM scan s WHERE s.sv IS NOT NULL) h)",
    "df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme)",
    "lexical AS MATERIALIZED (SELECT h.id, min(h.distance) AS distance, "
    "sum(ln(1 + (st.n - df.df + 0.5) "
    "/ (df.df + 0.5)) * h.tf * (%(k1)s + 1) / (h.tf + %(k1)s * (1 - %(b)s + %(b)s "
    "* h.dl / st.avgdl))) AS score FROM hits h JOIN df USING (lexeme) "
    # WITH TIES: the tie-break (newest first) is the fused ranking's.
    "CROSS JOIN stats st GROUP BY h.id ORDER BY score DESC "
    "FETCH FIRST %(pool)s ROWS WITH TIES)",
)
WHOLE_SEMANTIC = (
    "semantic AS (SELECT id, distance FROM scan "
    "WHERE distance IS NOT NULL ORDER BY distance FETCH FIRST %(pool)s ROWS WITH TIES)"
)
# The same ranking from the indexes (tulip_memory.postgres.search_index).
INDEXED_CTES = (
    "lexical AS MATERIALIZED (SELECT l.item_id AS id, l.bm25 AS score "
    f"FROM {LEXICAL_FUNCTION}(%(tenant)s, p.path, (SELECT tsq FROM q), "
    "(SELECT lexemes FROM q), %(lexical_now)s::timestamptz, %(k1)s, %(b)s, "
    "%(pool)s) l)",
    # LIMIT 1: a lookup by primary key a row, never a whole-table join.
    "worded AS MATERIALIZED (SELECT l.id, l.score, d.distance FROM lexical l "
    "CROSS JOIN LATERAL (SELECT {distance} AS distance FROM tulip_memory_store_item c "
    "WHERE c.tenant = %(tenant)s AND c.id = l.id LIMIT 1) d)",
)
CODES_PASS = (
    "SELECT c.id AS id FROM tulip_memory_store_item c WHERE {where} AND {coded} "
    "ORDER BY {closeness} LIMIT %(pass_pool)s"
)
CUT_PASS_CTES = (
    f"sample AS MATERIALIZED (SELECT {{closeness}} AS closeness FROM tulip_memory_store_item "
    f"c WHERE {{where}} AND {{coded}} LIMIT {PASS_SAMPLE_ROWS})",
    # Without a cut, the OR stops at its first term: no closeness computed twice.
    "cut_pass AS MATERIALIZED (SELECT c.id AS id FROM tulip_memory_store_item c "
    "WHERE {where} AND {coded} AND (p.cut IS NULL OR {closeness} <= "
    f"(SELECT CASE WHEN count(*) = {PASS_SAMPLE_ROWS} THEN coalesce((array_agg("
    "closeness ORDER BY closeness))[p.cut + 1], 'Infinity') ELSE 'Infinity' "
    "END FROM sample)) ORDER BY {closeness} LIMIT %(pass_pool)s)",
    # Too few rows got through the cut: the pass again without it (only one branch runs).
    "passed AS (SELECT id FROM cut_pass WHERE p.cut IS NULL OR (SELECT "
    "count(*) FROM cut_pass) >= %(pass_pool)s UNION ALL "
    "(SELECT * FROM ({whole_pass}) w WHERE p.cut IS NOT NULL AND (SELECT "
    "count(*) FROM cut_pass) < %(pass_pool)s))",
)
INDEXED_SEMANTIC = (
    "semantic AS (SELECT c.id AS id, c.embedding <=> %(vector)s::vector "
    "AS distance FROM tulip_memory_store_item c WHERE c.tenant = %(tenant)s "
    "AND c.id IN (SELECT id FROM passed) "
    "ORDER BY distance FETCH FIRST %(pool)s ROWS WITH TIES)"
)
POOLED = (
    "pooled AS MATERIALIZED (SELECT b.id, max(b.score) AS score, min(b.distance) AS "
    "distance FROM ({pooled}) b GROUP BY b.id)"
)
FUSED = (
    "fused AS MATERIALIZED (SELECT u.id, u.distance IS NULL AS lexical, "
    "coalesce(u.score / nullif(max(u.score) OVER (), 0), 0) "
    "+ %(weight)s * coalesce(1.0 - u.distance, 0.0) AS score FROM pooled u)"
)
# The tie-break columns are read only for the rows that can still make the top ``limit``.
RANKED = (
    "SELECT f.id, -f.score AS rank, f.lexical, {seen} AS seen FROM fused f "
    "CROSS JOIN LATERAL (SELECT r.updated_at AS updated_at, r.key AS key "
    "FROM tulip_memory_store_item r WHERE r.tenant = %(tenant)s AND r.id = f.id LIMIT 1) t "
    "WHERE f.score >= (SELECT min(x.score) FROM (SELECT score FROM fused "
    "ORDER BY score DESC LIMIT %(limit)s) x) "
    "ORDER BY f.score DESC, t.updated_at DESC, t.key LIMIT %(limit)s"
)
COUNT_ONLY = (
    "({ranked}) UNION ALL SELECT NULL::bigint, NULL::float8, NULL::boolean, {count} "
    "WHERE p.counted AND NOT EXISTS (SELECT FROM fused)"
)
ONE_OF = (
    "SELECT w.* FROM ({whole}) w WHERE NOT p.indexed UNION ALL "
    "SELECT x.* FROM ({indexed}) x WHERE p.indexed"
)
GENERIC_PLAN = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"


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
    """Rank each namespace path of ``tenant`` on its own, in ONE statement, inside
    ``tenant_atomic``. No ``terms`` nor ``vector``: newest first; ``vector`` only: exact
    cosine; ``terms``: BM25 fused with ``weight`` times the cosine. Ties: newest first,
    then key. ``use_indexes`` (one for all, or one a path) ranks a text query from the
    search indexes when they can serve it; ``known_rows`` enables the pass's cut.
    """
    pool = candidate_pool(limit)
    pass_pool = max(pass_pool, pool)
    params: dict[str, Any] = {
        "tenant": tenant,
        "paths": list(paths),
        "limit": limit,
        "indexed": _chosen_paths(use_indexes, len(paths)),
        "counted": _chosen_paths(count_rows, len(paths)),
        "cuts": _sample_cuts(known_rows, len(paths), pass_pool),
        "pool": pool,
        "pass_pool": pass_pool,
    }
    in_path = "c.namespace = p.path"
    if subtree:
        in_path = f"({in_path} OR starts_with(c.namespace, p.path || %(separator)s))"
        params["separator"] = NAMESPACE_SEPARATOR
    conditions = ["c.tenant = %(tenant)s", in_path]
    if value_condition is not None:
        condition, condition_params = value_condition("c.value")
        conditions.append(condition)
        params.update(condition_params)
    for index, (field, expected) in enumerate((metadata or {}).items()):
        params[f"meta_field_{index}"] = field
        params[f"meta_value_{index}"] = json.dumps(expected)
        conditions.append(
            f"c.metadata -> %(meta_field_{index})s::text = %(meta_value_{index})s::jsonb"
        )
    # One condition apart from the ranking: an expired row never takes part in it.
    if now is not None:
        params["now"] = now
        conditions.append("(c.expires_at IS NULL OR c.expires_at > %(now)s)")
    usable = "c.embedding IS NOT NULL"
    if source is not None:
        params["source"] = source
        usable = f"(c.embedding_source = %(source)s AND {usable})"
    if vector is not None:
        params["vector"] = vector
    prefix = ""
    if terms is not None:
        params.update(query=" ".join(terms), config=config, weight=weight, k1=bm25[0], b=bm25[1])
        prefix = QUERY_LEXEMES
        where = " AND ".join(conditions)
        whole = _hybrid(where, usable, vector is not None, params, candidates=vector_candidates)
        ranked = whole
        if any(params["indexed"]) and _indexes_serve(
            paths, vector, subtree, value_condition, metadata
        ):
            ranked = _hybrid_indexed(where, usable, params, candidates=vector_candidates)
            if not all(params["indexed"]):
                # Each branch behind a one-time filter: the other is planned, never run.
                ranked = ONE_OF.format(whole=whole, indexed=ranked)
    elif vector is None:
        ranked = RECENT.format(where=" AND ".join(conditions))
    else:
        conditions.append(usable)
        keep = ""
        if max_distance is not None:
            params["max_distance"] = max_distance
            keep = "WHERE r.rank <= %(max_distance)s"
        ranked = NEAREST.format(where=" AND ".join(conditions), keep=keep)
    seen = "m.seen" if terms is not None else "NULL::bigint"
    with items.binary_cursor() as cursor:
        if _plans_generically(cursor, items.db):
            cursor.execute(GENERIC_PLAN)
        cursor.execute(prefix + SEARCH.format(seen=seen, ranked=ranked), params)
        return _search_rows(cursor.fetchall())


def _plans_generically(cursor: Any, alias: str) -> bool:
    """Whether the statement is to be planned generically: prepared
    (``OPTIONS["prepare_threshold"]``), it is planned once, and every plan of it visits the
    rows the same way. Not on Citus, which routes it to the tenant's shard by the tenant's
    value, which a generic plan does not have."""
    prepared = cursor.cursor.connection.prepare_threshold is not None
    return prepared and not is_citus(connections[alias])


def _hybrid(
    where: str, usable: str, with_vector: bool, params: dict[str, Any], *, candidates: bool
) -> str:
    distance = "NULL::float8"
    if with_vector:
        matching = "" if candidates else " AND c.search_vector @@ (SELECT tsq FROM q)"
        distance = DISTANCE.format(usable=usable + matching)
    parts = [part.format(distance=distance, where=where) for part in WHOLE_CTES]
    pooled = "SELECT id, score, distance FROM lexical"
    if with_vector and candidates:
        parts.append(WHOLE_SEMANTIC)
        pooled += " UNION ALL SELECT id, NULL, distance FROM semantic"
    parts.append(POOLED.format(pooled=pooled))
    counted = any(params["counted"])  # else no count, nor its row for a path without hits
    return _fused(parts, "(SELECT n::bigint FROM stats)" if counted else None)


def _hybrid_indexed(where: str, usable: str, params: dict[str, Any], *, candidates: bool) -> str:
    """A text query's ranking from the indexes: the words' GIN index through the
    ``SECURITY DEFINER`` function, the vector candidates from a pass over the codes."""
    params["lexical_now"] = params.get("now")
    with_vector = "vector" in params
    distance = DISTANCE.format(usable=usable) if with_vector else "NULL::float8"
    parts = [part.format(distance=distance) for part in INDEXED_CTES]
    pooled = "SELECT id, score, distance FROM worded"
    if with_vector and candidates:
        planes = query_planes(params["vector"])
        for k, (plane, weight) in enumerate(zip(planes, QUERY_WEIGHTS, strict=True)):
            params[f"plane{k}"], params[f"weight{k}"] = plane, weight
        coded = f"c.search_codes IS NOT NULL AND {indexed('c')}"
        if "source" in params:
            coded = f"c.embedding_source = %(source)s AND {coded}"
        # A sum of Hamming distances to the query's planes, from the covering index.
        closeness = " + ".join(
            f"%(weight{k})s * (c.search_codes <~> %(plane{k})s::varbit)"
            for k in range(len(QUERY_WEIGHTS))
        )
        whole_pass = CODES_PASS.format(where=where, coded=coded, closeness=closeness)
        if not any(cut is not None for cut in params["cuts"]):
            parts.append(f"passed AS MATERIALIZED ({whole_pass})")
        else:
            parts += [
                part.format(where=where, coded=coded, closeness=closeness, whole_pass=whole_pass)
                for part in CUT_PASS_CTES
            ]
        parts.append(INDEXED_SEMANTIC)
        pooled += " UNION ALL SELECT id, NULL, distance FROM semantic"
    parts.append(POOLED.format(pooled=pooled))
    return _fused(parts, None)  # counting the rows would read them


def _chosen_paths(marks: bool | Sequence[bool], count: int) -> list[bool]:
    if isinstance(marks, bool):
        return [marks] * count
    chosen = [bool(mark) for mark in marks]
    if len(chosen) != count:
        raise ValueError(f"{len(chosen)} marks for the {count} paths of the search")
    return chosen


def _sample_cuts(
    known_rows: Sequence[int | None] | None, count: int, pass_pool: int
) -> list[int | None]:
    """Each path's cut: the place in its ranked sample of the worst row that still passes
    (None: all rows sorted)."""
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


def _fused(parts: list[str], count: str | None) -> str:
    """The fused ranking over ``parts``' ``pooled`` CTE, best first; ``count`` (SQL), when
    given, is the ``seen`` column of a ``counted`` path, which gives a row without a hit."""
    seen = "NULL::bigint" if count is None else f"CASE WHEN p.counted THEN {count} END"
    ranked = RANKED.format(seen=seen)
    if count is not None:
        ranked = COUNT_ONLY.format(ranked=ranked, count=count)
    return f"WITH {', '.join([*parts, FUSED])} {ranked}"


def _search_rows(rows: Sequence[tuple[Any, ...]]) -> SearchRows:
    found = SearchRows()
    for idx, key, value, meta, *columns, seen in rows:
        if seen is not None:
            found.namespace_rows[int(idx) - 1] = int(seen)
        if key is not None:  # else a counted path without a hit: its count only
            # The other columns are SearchRow's fields, in its order (every rank is float8).
            found.append(SearchRow(int(idx) - 1, key, _json(value), _json(meta), *columns))
    return found


def _json(value: Any) -> Any:
    # Django's psycopg configuration loads jsonb as text (JSONField parses it).
    return json.loads(value) if isinstance(value, str) else value
