"""Okapi BM25 in pure Python over the analysed term stream, fused by RRF with vectors.

The InMemoryStore design: per namespace a postings map term -> {key: tf}, the length of
each item and the running total; a query scores only the items that hold one of its terms.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np

from recall_prototypes.analysis import terms
from recall_prototypes.fusion import rrf
from tulip_memory.core.text import value_text

POOL = 50


class _Index:
    def __init__(self) -> None:
        self.postings: dict[str, dict[str, int]] = defaultdict(dict)
        self.lengths: dict[str, int] = {}
        self.keys: list[str] = []
        self.vectors: np.ndarray | None = None


class Bm25Subject:
    def __init__(
        self,
        embedder: Any = None,
        *,
        lexical: bool = True,
        stem: bool = True,
        stop: bool = True,
        k1: float = 1.2,
        b: float = 0.75,
        k: float = 60,
        weights: tuple[float, float] = (1.0, 1.0),
        alpha: float | None = None,
    ) -> None:
        # alpha: instead of RRF, score = bm25 / max(bm25) + alpha * cosine over the union.
        self.alpha = alpha
        self.embedder, self.lexical = embedder, lexical
        self.stem, self.stop, self.k1, self.b, self.k = stem, stop, k1, b, k
        self.weights = weights
        self.index: dict[tuple[str, ...], _Index] = {}

    def _terms(self, text: str) -> list[str]:
        return terms(text, stem_words=self.stem, drop_stop=self.stop)

    async def load(self, namespace: tuple[str, ...], items: list[tuple[str, Any]]) -> None:
        index = self.index.setdefault(namespace, _Index())
        texts = [value_text(value) for _key, value in items]
        for (key, _value), text in zip(items, texts, strict=True):
            counts = Counter(self._terms(text))
            for term, tf in counts.items():
                index.postings[term][key] = tf
            index.lengths[key] = sum(counts.values())
            index.keys.append(key)
        if self.embedder is not None:
            matrix = np.asarray(await self.embedder.embed_batch(texts), dtype=np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            index.vectors = matrix

    def bm25(self, index: _Index, query: str, limit: int) -> list[str]:
        scores = self.bm25_scores(index, query)
        return sorted(scores, key=lambda key: (-scores[key], key))[:limit]

    def bm25_scores(self, index: _Index, query: str) -> dict[str, float]:
        n = len(index.lengths)
        average = sum(index.lengths.values()) / max(n, 1)
        scores: dict[str, float] = defaultdict(float)
        for term in set(self._terms(query)):
            postings = index.postings.get(term)
            if not postings:
                continue
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for key, tf in postings.items():
                norm = self.k1 * (1 - self.b + self.b * index.lengths[key] / average)
                scores[key] += idf * tf * (self.k1 + 1) / (tf + norm)
        return scores

    async def vector(self, index: _Index, query: str, limit: int) -> list[str]:
        assert index.vectors is not None
        q = np.asarray(await self.embedder.embed(query), dtype=np.float32)
        similarity = index.vectors @ (q / max(float(np.linalg.norm(q)), 1e-12))
        best = np.argsort(-similarity, kind="stable")[:limit]
        return [index.keys[int(i)] for i in best]

    async def search(self, namespace: tuple[str, ...], query: str, limit: int) -> list[str]:
        index = self.index[namespace]
        if self.alpha is not None:
            return await self.score_fusion(index, query, limit)
        rankings = []
        if self.lexical:
            rankings.append((self.bm25(index, query, POOL), self.weights[0]))
        if self.embedder is not None:
            rankings.append((await self.vector(index, query, POOL), self.weights[1]))
        if len(rankings) == 1:
            return rankings[0][0][:limit]
        return rrf(rankings, self.k, limit)

    async def score_fusion(self, index: _Index, query: str, limit: int) -> list[str]:
        lexical = self.bm25_scores(index, query)
        top = max(lexical.values(), default=0.0) or 1.0
        q = np.asarray(await self.embedder.embed(query), dtype=np.float32)
        cosine = index.vectors @ (q / max(float(np.linalg.norm(q)), 1e-12))
        fused = {
            key: lexical.get(key, 0.0) / top + self.alpha * float(cosine[i])
            for i, key in enumerate(index.keys)
        }
        return sorted(fused, key=lambda key: (-fused[key], key))[:limit]
