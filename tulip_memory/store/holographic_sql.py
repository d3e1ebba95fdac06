"""HolographicStore's SQLite side: schema, namespace text forms, queries, transactions.

A namespace is stored as its compact JSON array (``["users","u1"]``): exact, reversible,
and a prefix ``("users",)`` is the string prefix ``["users",`` of every namespace under
it. The FTS5 table indexes two columns: ``scope``, one token per namespace (a BLAKE2b
digest of its JSON) so that a full-text query is confined to one namespace inside FTS5
itself, and ``content``, the value's tokens as :func:`tulip_memory.store.text.tokenize`
produced them (the ``unicode61`` tokenizer with ``remove_diacritics 0`` then splits them
exactly as they are, so every store matches the same words).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

__all__ = [
    "COUNT_MATCHES",
    "COUNT_NAMESPACE",
    "ROW_BUDGET",
    "SCHEMA",
    "Transaction",
    "fts_query",
    "metadata_matches",
    "ns_prefix_text",
    "ns_to_text",
    "scope_token",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS tulip_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tulip_items (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL,
    scope TEXT NOT NULL,
    content TEXT NOT NULL,
    hrr BLOB,
    embedding BLOB,
    PRIMARY KEY (ns, key)
);
CREATE INDEX IF NOT EXISTS tulip_items_recent ON tulip_items (ns, updated_at DESC, key);
CREATE VIRTUAL TABLE IF NOT EXISTS tulip_items_fts USING fts5(
    scope, content, content='tulip_items', content_rowid='rowid',
    tokenize='unicode61 remove_diacritics 0'
);
CREATE TRIGGER IF NOT EXISTS tulip_items_fts_insert AFTER INSERT ON tulip_items BEGIN
    INSERT INTO tulip_items_fts (rowid, scope, content)
    VALUES (new.rowid, new.scope, new.content);
END;
CREATE TRIGGER IF NOT EXISTS tulip_items_fts_delete AFTER DELETE ON tulip_items BEGIN
    INSERT INTO tulip_items_fts (tulip_items_fts, rowid, scope, content)
    VALUES ('delete', old.rowid, old.scope, old.content);
END;
CREATE TRIGGER IF NOT EXISTS tulip_items_fts_update AFTER UPDATE ON tulip_items BEGIN
    INSERT INTO tulip_items_fts (tulip_items_fts, rowid, scope, content)
    VALUES ('delete', old.rowid, old.scope, old.content);
    INSERT INTO tulip_items_fts (rowid, scope, content)
    VALUES (new.rowid, new.scope, new.content);
END;
"""


def ns_to_text(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def ns_prefix_text(prefix: tuple[str, ...]) -> str:
    """The string every namespace strictly under ``prefix`` starts with."""
    return ns_to_text(prefix)[:-1] + ","


def scope_token(ns_text: str) -> str:
    return "s" + hashlib.blake2b(ns_text.encode("utf-8"), digest_size=12).hexdigest()


def fts_query(ns_text: str, terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: the namespace's scope AND any of ``terms``."""
    quoted = " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
    return f'scope : "{scope_token(ns_text)}" AND content : ({quoted})'


# A query's candidates are ranked by BM25 over at most about this many rows: in a bigger
# namespace the query's most common terms are left out of the candidate search (they
# still count in the HRR ranking). BM25 costs microseconds per matching row, and a very
# common word can match half of a namespace.
ROW_BUDGET = 4000

COUNT_NAMESPACE = "SELECT count(*) FROM (SELECT 1 FROM tulip_items WHERE ns = ? LIMIT ?)"
COUNT_MATCHES = (
    "SELECT count(*) FROM (SELECT 1 FROM tulip_items_fts WHERE tulip_items_fts MATCH ? LIMIT ?)"
)


def metadata_matches(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether ``metadata`` has every field of ``wanted`` with an equal value."""
    return all(field in metadata and metadata[field] == value for field, value in wanted.items())


class Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> sqlite3.Cursor:
        self._cursor = self._conn.cursor()
        self._cursor.execute("BEGIN IMMEDIATE")
        return self._cursor

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._conn.execute("ROLLBACK" if exc_type else "COMMIT")
        self._cursor.close()
