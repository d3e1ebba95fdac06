"""HolographicStore's SQLite side: the schema, every statement (named) and transactions.

A namespace is stored as its compact JSON array, so a prefix is a string prefix; the FTS5
table holds one ``scope`` token per namespace and the value's stemmed tokens.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

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
    expires_at INTEGER,
    PRIMARY KEY (ns, key)
);
CREATE INDEX IF NOT EXISTS tulip_items_recent ON tulip_items (ns, updated_at DESC, key);
"""

# Whether the table has the expiry column (a file from before expiry has not).
HAS_EXPIRY_COLUMN = "SELECT 1 FROM pragma_table_info('tulip_items') WHERE name = 'expires_at'"
ADD_EXPIRY_COLUMN = "ALTER TABLE tulip_items ADD COLUMN expires_at INTEGER"
# The sweep's index: only the rows that expire.
EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS tulip_items_expiry ON tulip_items (expires_at) "
    "WHERE expires_at IS NOT NULL"
)

# The FTS5 tokenizer: the package's tokens (already case-folded, NFKC) stemmed by Porter.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 0"

FTS_SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS tulip_items_fts USING fts5(
    scope, content, content='tulip_items', content_rowid='rowid',
    tokenize='{FTS_TOKENIZER}'
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

# The FTS table's CREATE statement as the file holds it (None before the first open).
SELECT_FTS_SCHEMA = (
    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tulip_items_fts'"
)
# Drop an FTS table made with another tokenizer; FTS_SCHEMA then recreates it, rebuilt.
DROP_FTS = "DROP TABLE tulip_items_fts"
REBUILD_FTS = "INSERT INTO tulip_items_fts (tulip_items_fts) VALUES ('rebuild')"


def ns_to_text(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def ns_prefix_text(prefix: tuple[str, ...]) -> str:
    """The string every namespace strictly under ``prefix`` starts with."""
    return ns_to_text(prefix)[:-1] + ","


def scope_token(ns_text: str) -> str:
    return "s" + hashlib.blake2b(ns_text.encode("utf-8"), digest_size=12).hexdigest()


# --- statements -------------------------------------------------------------------------

# The rows every read keeps: not expired by the store's clock (``tulip_now()``, µs).
LIVE = "(tulip_items.expires_at IS NULL OR tulip_items.expires_at > tulip_now())"

# The columns a StoreItem is built from, in HolographicStore._item's order.
ITEM_COLUMNS = "key, value, metadata, created_at, updated_at, version"

SELECT_META = "SELECT name, value FROM tulip_meta"
SELECT_EMBEDDING_DIM = "SELECT value FROM tulip_meta WHERE name = 'embedding_dim'"
# Parameters: name, value.
INSERT_META = "INSERT INTO tulip_meta VALUES (?, ?)"

# The row a write updates: its last timestamp, version and whether it is live.
SELECT_WRITE_STATE = f"SELECT updated_at, version, {LIVE} FROM tulip_items WHERE ns = ? AND key = ?"
INSERT_ITEM = (
    "INSERT INTO tulip_items (ns, key, value, metadata, created_at, updated_at, "
    "version, scope, content, hrr, embedding, expires_at) "
    "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)"
)
UPDATE_ITEM = (
    "UPDATE tulip_items SET value = ?, metadata = ?, updated_at = ?, version = ?, "
    "content = ?, hrr = ?, embedding = ?, expires_at = ? WHERE ns = ? AND key = ?"
)
# Deletes return whether each deleted row was live (an expired one was already gone).
# (Written with coalesce: SQLite 3.40 evaluates "expires_at IS NULL" wrongly in RETURNING.)
_RETURNING_LIVE = "RETURNING coalesce(expires_at > tulip_now(), 1)"
DELETE_ITEM = f"DELETE FROM tulip_items WHERE ns = ? AND key = ? {_RETURNING_LIVE}"
DELETE_NAMESPACE = f"DELETE FROM tulip_items WHERE ns = ? {_RETURNING_LIVE}"
SWEEP_EXPIRED = "DELETE FROM tulip_items WHERE expires_at IS NOT NULL AND expires_at <= tulip_now()"

# One item by (ns, key): all of it, its value, its existence, its embedding.
SELECT_ITEM = f"SELECT {ITEM_COLUMNS} FROM tulip_items WHERE ns = ? AND key = ? AND {LIVE}"
SELECT_VALUE = f"SELECT value FROM tulip_items WHERE ns = ? AND key = ? AND {LIVE}"
SELECT_EXISTS = f"SELECT 1 FROM tulip_items WHERE ns = ? AND key = ? AND {LIVE}"
SELECT_EMBEDDING = f"SELECT embedding FROM tulip_items WHERE ns = ? AND key = ? AND {LIVE}"

# A namespace's items newest first (the ``tulip_items_recent`` index); parameters: ns, limit.
NEWEST_ITEMS = (
    f"SELECT {ITEM_COLUMNS} FROM tulip_items WHERE ns = ? AND {LIVE} "
    "ORDER BY updated_at DESC, key LIMIT ?"
)
NEWEST_KEYS = (
    f"SELECT key FROM tulip_items WHERE ns = ? AND {LIVE} ORDER BY updated_at DESC, key LIMIT ?"
)

LIST_NAMESPACES = f"SELECT DISTINCT ns FROM tulip_items WHERE {LIVE}"
# Parameters: the prefix's own text, the length and text of what its children start with.
LIST_NAMESPACES_UNDER = (
    f"SELECT DISTINCT ns FROM tulip_items WHERE (ns = ? OR substr(ns, 1, ?) = ?) AND {LIVE}"
)

# The BM25-best ``limit`` matches of an FTS5 expression (parameters: MATCH expression,
# limit); the scope column weighs nothing, and ties are broken before the cut to limit.
BM25_CANDIDATES = (
    f"SELECT {ITEM_COLUMNS}, hrr, -hits.score FROM ("
    "SELECT tulip_items_fts.rowid AS id, bm25(tulip_items_fts, 0.0, 1.0) AS score "
    "FROM tulip_items_fts JOIN tulip_items ON tulip_items.rowid = tulip_items_fts.rowid "
    f"WHERE tulip_items_fts MATCH ? AND {LIVE} "
    "ORDER BY score, tulip_items.updated_at DESC, tulip_items.key LIMIT ?"
    ") AS hits JOIN tulip_items ON tulip_items.rowid = hits.id "
    "ORDER BY hits.score, updated_at DESC, key"
)
# How many rows a namespace has / an FTS5 expression matches, up to a cap.
COUNT_NAMESPACE = "SELECT count(*) FROM (SELECT 1 FROM tulip_items WHERE ns = ? LIMIT ?)"
COUNT_MATCHES = (
    "SELECT count(*) FROM (SELECT 1 FROM tulip_items_fts WHERE tulip_items_fts MATCH ? LIMIT ?)"
)

# Every HRR vector of a namespace, newest first, so a stable ranking breaks ties so.
NAMESPACE_PHASES = (
    f"SELECT rowid, hrr FROM tulip_items WHERE ns = ? AND {LIVE} ORDER BY updated_at DESC, key"
)
# Every item of a namespace with a caller's embedding (parameter: ns).
EMBEDDED_ITEMS = (
    f"SELECT {ITEM_COLUMNS}, embedding FROM tulip_items "
    f"WHERE ns = ? AND embedding IS NOT NULL AND {LIVE} ORDER BY updated_at DESC, key"
)
# Only the rowid, key and vector of each: what an exact scan reads before the top rows.
NAMESPACE_EMBEDDINGS = (
    "SELECT rowid, key, embedding FROM tulip_items "
    f"WHERE ns = ? AND embedding IS NOT NULL AND {LIVE}"
)


def items_by_rowid(count: int) -> str:
    return f"SELECT rowid, {ITEM_COLUMNS} FROM tulip_items WHERE rowid IN ({','.join('?' * count)})"


def metadata_matches(metadata: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether ``metadata`` has every field of ``wanted`` with an equal value (as JSON)."""
    return all(
        field in metadata and _json_equal(metadata[field], value) for field, value in wanted.items()
    )


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality, as PostgreSQL's ``jsonb`` has it: ``true`` is not ``1`` (Python's
    ``True == 1``), numbers compare by value (``1`` is ``1.0``), containers element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    return bool(a == b)


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
