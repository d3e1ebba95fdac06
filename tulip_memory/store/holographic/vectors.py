"""HolographicStore's vectors: the HRR phases of each item and callers' float32 embeddings.

An item without any token has no HRR vector (``NULL``) and scores as a zero phase vector;
embeddings are little-endian float32, ranked by an exact cosine scan.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from tulip_memory.core import hrr
from tulip_memory.store.holographic.sql import NAMESPACE_PHASES
from tulip_memory.store.ranking import cosine_similarities, cosine_top

__all__ = [
    "embedding_blob",
    "embedding_from_blob",
    "embedding_similarities",
    "embedding_top",
    "hrr_blob",
    "hrr_similarities",
    "hrr_top",
]

# Rows read per step of an exact HRR scan: bounds the memory of a scan of a big namespace.
_SCAN_CHUNK = 4096


def hrr_blob(tokens: Sequence[str], dim: int) -> bytes | None:
    """The stored HRR vector of an item's tokens; ``None`` when it has none."""
    phases = hrr.encode_tokens(list(tokens), dim)
    return None if phases is None else hrr.to_bytes(phases)


def _phase_matrix(blobs: Sequence[bytes | None], dim: int) -> np.ndarray:
    matrix = np.zeros((len(blobs), dim))
    for row, blob in enumerate(blobs):
        if blob is not None:
            matrix[row] = hrr.from_bytes(blob, dim)
    return matrix


def _query_phases(terms: list[str], dim: int) -> np.ndarray:
    query = hrr.encode_tokens(terms, dim)
    assert query is not None  # a search with terms; a search without any lists the newest
    return query


def hrr_similarities(terms: list[str], blobs: Sequence[bytes | None], dim: int) -> np.ndarray:
    """The HRR similarity of the query ``terms`` to each stored vector of ``blobs``."""
    return hrr.similarities(_query_phases(terms, dim), _phase_matrix(blobs, dim))


def hrr_top(conn: sqlite3.Connection, ns: str, terms: list[str], dim: int, limit: int) -> list[int]:
    """The rowids of the ``limit`` items of namespace ``ns`` most HRR-similar to ``terms``
    (an exact scan, best first; ties keep the table's order)."""
    query = _query_phases(terms, dim)
    cursor = conn.execute(NAMESPACE_PHASES, (ns,))
    ids: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    while chunk := cursor.fetchmany(_SCAN_CHUNK):
        ids.append(np.fromiter((row[0] for row in chunk), dtype=np.int64, count=len(chunk)))
        scores.append(hrr.similarities(query, _phase_matrix([row[1] for row in chunk], dim)))
    if not ids:
        return []
    all_ids, all_scores = np.concatenate(ids), np.concatenate(scores)
    return [int(all_ids[i]) for i in np.argsort(-all_scores, kind="stable")[:limit]]


def embedding_blob(vector: list[float]) -> bytes:
    """The stored form of a caller's validated embedding, checked again as float32 (where
    it may overflow or underflow)."""
    with np.errstate(over="ignore"):  # an overflow becomes inf, refused below
        as_float32 = np.asarray(vector, dtype="<f4")
    if not np.isfinite(as_float32).all() or not as_float32.any():
        raise ValueError("embedding must be finite and not all zeros once stored as float32")
    return as_float32.tobytes()


def embedding_from_blob(blob: bytes) -> list[float]:
    return np.frombuffer(blob, dtype="<f4").astype(float).tolist()


def _embedding_matrix(blobs: Sequence[bytes]) -> np.ndarray:
    return np.stack([np.frombuffer(blob, dtype="<f4") for blob in blobs])


def _as_stored(query: list[float]) -> np.ndarray:
    """The query rounded as the embeddings were stored: a query equal to a stored vector
    then scores 1 with it."""
    with np.errstate(over="ignore"):  # an overflow becomes inf, refused below
        as_float32 = np.asarray(query, dtype="<f4")
    if not np.isfinite(as_float32).all() or not as_float32.any():
        raise ValueError(
            "query_embedding must be finite and not all zeros once rounded to float32, "
            "as the stored embeddings are"
        )
    return as_float32


def embedding_similarities(blobs: Sequence[bytes], query: list[float]) -> np.ndarray:
    """The cosine similarity of each stored embedding to ``query``."""
    return cosine_similarities(_embedding_matrix(blobs), _as_stored(query))


def embedding_top(
    blobs: Sequence[bytes], query: list[float], limit: int, threshold: float | None
) -> list[tuple[int, float]]:
    """``(position, cosine)`` of the ``limit`` embeddings most similar to ``query``."""
    return cosine_top(_embedding_matrix(blobs), _as_stored(query), limit, threshold)
