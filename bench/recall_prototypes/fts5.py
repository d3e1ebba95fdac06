"""SQLite FTS5 (``porter unicode61``) bm25 over an OR of the query's terms, fused with HRR.

The HolographicStore design. The query drops stop words before the MATCH (FTS5 has no stop
list of its own; the index keeps them so phrase-free bm25 statistics stay those of the
text); HRR vectors encode the analysed terms (stop words dropped, stemmed) of each item.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from recall_prototypes.analysis import terms
from recall_prototypes.fusion import rrf
from tulip_memory.core import hrr
from tulip_memory.core.text import value_text

POOL = 50


class Fts5Subject:
    def __init__(
        self,
        *,
        lexical: bool = True,
        hrr: bool = True,
        k: float = 60,
        tokenizer: str = "porter unicode61",
        weights: tuple[float, float] = (1.0, 1.0),
        alpha: float | None = None,
    ) -> None:
        # alpha: instead of RRF, the bm25 top ``POOL`` re-scored by
        # bm25 / max(bm25) + alpha * HRR similarity (HRR never adds candidates).
        self.alpha = alpha
        self.lexical, self.use_hrr, self.k, self.weights = lexical, hrr, k, weights
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(ns UNINDEXED, key UNINDEXED, body, "
            f"tokenize='{tokenizer}')"
        )
        self.phases: dict[tuple[str, ...], tuple[list[str], np.ndarray]] = {}
        self.rows: dict[tuple[tuple[str, ...], str], int] = {}

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        ns = "/".join(namespace)
        texts = [value_text(value) for _key, value in items]
        self.db.executemany(
            "INSERT INTO t (ns, key, body) VALUES (?, ?, ?)",
            [(ns, key, text) for (key, _v), text in zip(items, texts, strict=True)],
        )
        rows = [hrr.encode_tokens(terms(text), hrr.DEFAULT_DIM) for text in texts]
        matrix = np.stack([r if r is not None else np.zeros(hrr.DEFAULT_DIM) for r in rows])
        self.phases[namespace] = ([key for key, _v in items], matrix)
        self.rows.update({(namespace, key): i for i, (key, _v) in enumerate(items)})

    def bm25(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        return [key for key, _score in self.bm25_scored(namespace, query, limit)]

    def bm25_scored(
        self, namespace: tuple[str, ...], query: str, limit: int
    ) -> list[tuple[str, float]]:
        words = sorted(set(terms(query, stem_words=False)))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT key, -bm25(t) FROM t WHERE t MATCH ? AND ns = ? ORDER BY bm25(t) LIMIT ?",
            (match, "/".join(namespace), limit),
        ).fetchall()
        return [(row[0], row[1]) for row in rows]

    def hrr_scan(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        encoded = hrr.encode_tokens(terms(query), hrr.DEFAULT_DIM)
        if encoded is None:
            return []
        keys, matrix = self.phases[namespace]
        best = np.argsort(-hrr.similarities(encoded, matrix), kind="stable")[:limit]
        return [keys[int(i)] for i in best]

    def rescored(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        scored = self.bm25_scored(namespace, query, POOL)
        encoded = hrr.encode_tokens(terms(query), hrr.DEFAULT_DIM)
        if not scored or encoded is None or self.alpha is None:
            return [key for key, _s in scored[:limit]]
        _keys, matrix = self.phases[namespace]
        rows = matrix[[self.rows[(namespace, key)] for key, _s in scored]]
        similarity = hrr.similarities(encoded, rows)
        top = scored[0][1] or 1.0
        fused = {
            key: s / top + self.alpha * float(similarity[i]) for i, (key, s) in enumerate(scored)
        }
        return sorted(fused, key=lambda key: (-fused[key], key))[:limit]

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        if self.alpha is not None:
            return self.rescored(namespace, query, limit)
        rankings = []
        if self.lexical:
            rankings.append((self.bm25(namespace, query, POOL), self.weights[0]))
        if self.use_hrr:
            rankings.append((self.hrr_scan(namespace, query, POOL), self.weights[1]))
        if len(rankings) == 1:
            return rankings[0][0][:limit]
        return rrf(rankings, self.k, limit)
