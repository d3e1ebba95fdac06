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

from tulip_memory.store import hrr
from tulip_memory.store.text import value_text

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
    ) -> None:
        self.lexical, self.use_hrr, self.k, self.weights = lexical, hrr, k, weights
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            f"CREATE VIRTUAL TABLE t USING fts5(ns UNINDEXED, key UNINDEXED, body, "
            f"tokenize='{tokenizer}')"
        )
        self.phases: dict[tuple[str, ...], tuple[list[str], np.ndarray]] = {}

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

    def bm25(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        words = sorted(set(terms(query, stem_words=False)))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.db.execute(
            "SELECT key FROM t WHERE t MATCH ? AND ns = ? ORDER BY bm25(t) LIMIT ?",
            (match, "/".join(namespace), limit),
        ).fetchall()
        return [row[0] for row in rows]

    def hrr_scan(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        encoded = hrr.encode_tokens(terms(query), hrr.DEFAULT_DIM)
        if encoded is None:
            return []
        keys, matrix = self.phases[namespace]
        best = np.argsort(-hrr.similarities(encoded, matrix), kind="stable")[:limit]
        return [keys[int(i)] for i in best]

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        rankings = []
        if self.lexical:
            rankings.append((self.bm25(namespace, query, POOL), self.weights[0]))
        if self.use_hrr:
            rankings.append((self.hrr_scan(namespace, query, POOL), self.weights[1]))
        if len(rankings) == 1:
            return rankings[0][0][:limit]
        return rrf(rankings, self.k, limit)
