"""PgMemory's hybrid ranking in ONE statement: an OR tsquery over ``to_tsvector`` + vectors.

Items are written by ``PgMemory.put_batch`` (so the vectors are the store's own); the
prototype adds a GIN expression index on ``to_tsvector('<config>', search_text)`` and runs
its statement on a superuser connection (row-level security is bypassed: the app role's
``tenant = current_setting(...)`` policy adds one equality to each CTE).

The query's lexemes are those of ``to_tsvector(config, query)`` (stop words dropped,
stemmed by the same dictionary as the rows), OR-ed into a tsquery; the lexical CTE ranks
the matching rows by ``ts_rank_cd`` or by BM25 (idf from the namespace's document
frequencies of the query lexemes), the vector CTE by cosine distance; both keep the best
``pool`` and the outer query fuses their ranks by RRF.
"""

from __future__ import annotations

from typing import Any

from tulip_memory.core.namespaces import encode_namespace
from tulip_memory.store import PgMemory

TABLE = "tulip_memory_store_item"
CONFIGS = ("english", "simple")

# ts_rank_cd over the OR tsquery (no idf).
TS_RANK_CD = """
lexical AS (
    SELECT key, score, row_number() OVER (ORDER BY score DESC, key) AS r
    FROM (
        SELECT i.key, ts_rank_cd(to_tsvector('{cfg}', i.search_text), q.tsq, {norm}) AS score
        FROM {table} i, q
        WHERE i.tenant = %(tenant)s AND i.namespace = %(ns)s
          AND to_tsvector('{cfg}', i.search_text) @@ q.tsq
    ) matched
    ORDER BY r LIMIT %(pool)s
)"""

# Okapi BM25 (k1, b) with idf from the namespace: one row per (item, query lexeme) matched.
BM25 = """
terms AS (
    SELECT lexeme, lexeme::tsquery AS tsq
    FROM unnest(tsvector_to_array(to_tsvector('{cfg}', %(query)s))) AS lexeme
),
stats AS (
    SELECT count(*)::float8 AS n, coalesce(avg({dl}), 1)::float8 AS avgdl
    FROM {table} i WHERE i.tenant = %(tenant)s AND i.namespace = %(ns)s
),
hits AS (
    SELECT i.key, t.lexeme, {dl} AS dl, (
        SELECT coalesce(array_length(u.positions, 1), 1) FROM unnest({tsv}) AS u
        WHERE u.lexeme = t.lexeme
    ) AS tf
    FROM terms t JOIN {table} i ON {tsv} @@ t.tsq
    WHERE i.tenant = %(tenant)s AND i.namespace = %(ns)s
),
df AS (SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme),
lexical AS (
    SELECT key, score, row_number() OVER (ORDER BY score DESC, key) AS r
    FROM (
        SELECT h.key, sum(
            ln(1 + (st.n - df.df + 0.5) / (df.df + 0.5))
            * h.tf * ({k1} + 1) / (h.tf + {k1} * (1 - {b} + {b} * h.dl / st.avgdl))
        ) AS score
        FROM hits h JOIN df USING (lexeme) CROSS JOIN stats st
        GROUP BY h.key
    ) scored
    ORDER BY r LIMIT %(pool)s
)"""

# Score fusion: lexical score / the best lexical score + alpha * cosine similarity, over
# the union of both pools (a row of the lexical pool gets its cosine from its own vector).
SCORE_FUSED = """
SELECT c.key FROM (SELECT key FROM lexical UNION SELECT key FROM semantic) c
JOIN {table} i ON i.tenant = %(tenant)s AND i.namespace = %(ns)s AND i.key = c.key
LEFT JOIN lexical l ON l.key = c.key
ORDER BY coalesce(l.score / nullif((SELECT max(score) FROM lexical), 0), 0)
         + %(alpha)s * coalesce(1 - (i.embedding <=> %(vector)s::vector), 0) DESC, c.key
LIMIT %(limit)s
"""

SEMANTIC = """
semantic AS (
    SELECT i.key, row_number() OVER (
        ORDER BY i.embedding <=> %(vector)s::vector, i.key
    ) AS r
    FROM {table} i
    WHERE i.tenant = %(tenant)s AND i.namespace = %(ns)s AND i.embedding IS NOT NULL
    ORDER BY r LIMIT %(pool)s
)"""

STATEMENT = """
WITH q AS (
    SELECT (
        SELECT string_agg(quote_literal(lexeme), ' | ')
        FROM unnest(tsvector_to_array(to_tsvector('{cfg}', %(query)s))) AS lexeme
    )::tsquery AS tsq
),
{ctes}
{select}
"""

RRF_FUSED = """
SELECT key FROM (
    SELECT coalesce(l.key, s.key) AS key,
           coalesce(%(wl)s / (%(k)s + l.r), 0) + coalesce(%(wv)s / (%(k)s + s.r), 0) AS score
    FROM {join}
) fused
ORDER BY score DESC, key
LIMIT %(limit)s
"""


class PgHybrid:
    def __init__(
        self,
        ctx: Any,
        embedder: Any = None,
        *,
        config: str = "english",
        lexical: str | None = "ts_rank_cd",
        vector: bool = True,
        norm: int = 0,
        k: float = 60,
        k1: float = 1.2,
        b: float = 0.75,
        weights: tuple[float, float] = (1.0, 1.0),
        pool: int = 50,
        alpha: float | None = None,
        stored: bool = False,
    ) -> None:
        if config not in CONFIGS:
            raise ValueError(f"config must be one of {CONFIGS}, got {config!r}")
        self.admin_url = ctx.admin_url
        self.store = PgMemory(embedder=embedder)
        self.config, self.vector, self.k, self.weights, self.pool = config, vector, k, weights, pool
        ctes, join = [], []
        if lexical == "ts_rank_cd":
            ctes.append(TS_RANK_CD.format(cfg=config, norm=int(norm), table=TABLE))
        elif lexical == "bm25":
            if stored:
                tsv, dl = f"i.recall_tsv_{config}", f"i.recall_len_{config}"
            else:
                tsv = f"to_tsvector('{config}', i.search_text)"
                dl = f"length({tsv})"
            ctes.append(
                BM25.format(cfg=config, k1=float(k1), b=float(b), table=TABLE, tsv=tsv, dl=dl)
            )
        if vector:
            ctes.append(SEMANTIC.format(table=TABLE))
        if lexical and vector:
            join = "lexical l FULL OUTER JOIN semantic s USING (key)"
        elif lexical:
            join = "lexical l LEFT JOIN (SELECT NULL::text AS key, NULL::int AS r) s ON false"
        else:
            join = "semantic s LEFT JOIN (SELECT NULL::text AS key, NULL::int AS r) l ON false"
        if alpha is not None and not (lexical and vector):
            raise ValueError("alpha (score fusion) needs both a lexical ranking and vectors")
        select = (
            SCORE_FUSED.format(table=TABLE) if alpha is not None else RRF_FUSED.format(join=join)
        )
        self.alpha, self.stored = alpha, stored
        self.sql = STATEMENT.format(cfg=config, ctes=",".join(ctes), select=select)
        self.conn: Any = None

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        await self.store.put_batch([(namespace, key, value, None) for key, value in items])

    async def prepare(self) -> None:
        import psycopg

        self.conn = await psycopg.AsyncConnection.connect(self.admin_url, autocommit=True)
        await self.conn.execute(
            f"CREATE INDEX IF NOT EXISTS recall_proto_tsv_{self.config} ON {TABLE} "
            f"USING gin (to_tsvector('{self.config}', search_text))"
        )
        if self.stored:
            # What phase 2 would migrate: the tsvector and its length, stored, GIN-indexed.
            cfg = self.config
            await self.conn.execute(
                f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS recall_tsv_{cfg} tsvector "
                f"GENERATED ALWAYS AS (to_tsvector('{cfg}', search_text)) STORED"
            )
            await self.conn.execute(
                f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS recall_len_{cfg} integer "
                f"GENERATED ALWAYS AS (length(to_tsvector('{cfg}', search_text))) STORED"
            )
            await self.conn.execute(
                f"CREATE INDEX IF NOT EXISTS recall_proto_tsv_stored_{cfg} ON {TABLE} "
                f"USING gin (recall_tsv_{cfg})"
            )
        await self.conn.execute(f"ANALYZE {TABLE}")

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        vector = None
        if self.vector:
            encoded = await self.store.encoder.encode(namespace[0], query)
            vector = None if encoded is None else self.store.encoder.literal(encoded)
        params = {
            "query": query,
            "tenant": namespace[0],
            "ns": encode_namespace(namespace),
            "vector": vector,
            "pool": self.pool,
            "k": float(self.k),
            "wl": float(self.weights[0]),
            "wv": float(self.weights[1]),
            "limit": limit,
            "alpha": float(self.alpha or 0),
        }
        cursor = await self.conn.execute(self.sql, params)
        return [row[0] for row in await cursor.fetchall()]
