"""HolographicStore's full-text side: FTS5 match expressions and BM25 candidate search.

A query's terms are OR-ed and confined to one namespace by its scope token. In a
namespace of more than ``ROW_BUDGET`` items only the query's rarest terms are matched
(BM25 costs microseconds a matching row), so such a search may return fewer than
``limit`` items; the HRR ranking of the candidates still counts every term.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

from tulip_memory.store.holographic.sql import (
    BM25_CANDIDATES,
    COUNT_MATCHES,
    COUNT_NAMESPACE,
    scope_token,
)

__all__ = ["ROW_BUDGET", "bm25_candidates", "fts_query"]

# A query's candidates are ranked by BM25 over at most about this many rows.
ROW_BUDGET = 4000


def fts_query(ns_text: str, terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: the namespace's scope AND any of ``terms``."""
    quoted = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return f'scope : "{scope_token(ns_text)}" AND content : ({quoted})'


def _candidate_terms(conn: sqlite3.Connection, ns: str, terms: list[str]) -> list[str]:
    """The query terms BM25 ranks: in a large namespace the rarest whose matches add up to
    at most ``ROW_BUDGET`` rows (at least one); a term matching nothing is left out."""
    cap = ROW_BUDGET + 1
    if len(terms) == 1 or conn.execute(COUNT_NAMESPACE, (ns, cap)).fetchone()[0] < cap:
        return terms
    counts = {
        term: conn.execute(COUNT_MATCHES, (fts_query(ns, [term]), cap)).fetchone()[0]
        for term in terms
    }
    chosen: list[str] = []
    total = 0
    for term in sorted((term for term in terms if counts[term]), key=lambda t: (counts[t], t)):
        if chosen and total + counts[term] > ROW_BUDGET:
            break
        chosen.append(term)
        total += counts[term]
    return chosen


def bm25_candidates(conn: sqlite3.Connection, ns: str, terms: list[str], pool: int) -> list[Any]:
    """The ``pool`` BM25-best items of ``ns`` for ``terms`` (``ITEM_COLUMNS``, ``hrr``,
    score), best first, ties newest-updated first, then key."""
    chosen = _candidate_terms(conn, ns, terms)
    if not chosen:  # no term of the query is in the namespace
        return []
    return conn.execute(BM25_CANDIDATES, (fts_query(ns, chosen), pool)).fetchall()
