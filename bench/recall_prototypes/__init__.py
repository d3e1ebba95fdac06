"""Ranking prototypes measured by ``bench/recall.py`` (outside the package, phase 1 of issue 12).

- ``analysis``: the term stream — the package tokeniser, English stop words (question words
  included), Snowball (Porter 2) stemming;
- ``fusion``: reciprocal-rank fusion;
- ``bm25``: Okapi BM25 in pure Python over the term stream, optionally fused with vectors
  (the InMemoryStore design);
- ``fts5``: SQLite FTS5 with the ``porter unicode61`` tokenizer, bm25, optionally fused with
  an HRR scan (the HolographicStore design);
- ``pg_hybrid``: one PostgreSQL statement, an OR tsquery over ``to_tsvector`` plus the
  vector top-N, fused (the PgMemory design).
"""

from recall_prototypes.bm25 import Bm25Subject
from recall_prototypes.fts5 import Fts5Subject
from recall_prototypes.pg_hybrid import PgHybrid

__all__ = ["Bm25Subject", "Fts5Subject", "PgHybrid"]
