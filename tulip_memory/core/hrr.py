"""Holographic reduced representations (HRR) of text, as phase vectors.

A text is the phase of the sum of its distinct tokens' unit phasors, each token's phases
drawn from BLAKE2b (deterministic everywhere) and quantised to uint16. Similarity is
``mean(cos(a - b))``, which equals the cosine of :func:`phases_to_vector`'s vectors, so a
pgvector cosine search ranks as HRR does.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

from tulip_memory.core.numbers import check_int
from tulip_memory.core.text import tokenize

__all__ = [
    "DEFAULT_DIM",
    "MAX_TOKENS",
    "encode_phases",
    "encode_tokens",
    "from_bytes",
    "phases_to_vector",
    "similarities",
    "similarity",
    "to_bytes",
    "validate_dim",
]

DEFAULT_DIM = 512  # phases per text: the default of every HRR user (stores, embedder)
MAX_TOKENS = 4096
"""Distinct tokens encoded per text (the first ones): bounds one text's encoding time. A
superposition of thousands of tokens matches any short query weakly anyway, and the
stores' word search still finds the words past it."""
_PERSON = b"tulip-hrr-v1"  # changing it changes every encoding
_STEPS = 65536  # phases are multiples of 2π / 65536
_SCALE = 2 * np.pi / _STEPS


def validate_dim(dim: object) -> int:
    """``dim`` if it is an ``int`` >= 1: the HRR width every user of this module accepts."""
    return check_int(dim, "dim")


@lru_cache(maxsize=4096)  # bounded memory: the tokens of one long text
def _token_phasor(token: str, dim: int) -> np.ndarray:
    data = token.encode("utf-8")
    need = 2 * dim
    digests = b"".join(
        hashlib.blake2b(n.to_bytes(4, "little") + data, digest_size=64, person=_PERSON).digest()
        for n in range(-(-need // 64))
    )
    steps = np.frombuffer(digests[:need], dtype="<u2").astype(np.float64)
    phasor = np.exp(1j * steps * _SCALE).astype(np.complex64)
    phasor.setflags(write=False)
    return phasor


def encode_tokens(tokens: list[str] | set[str], dim: int) -> np.ndarray | None:
    """The quantised phases of a bag of tokens (the first :data:`MAX_TOKENS` distinct ones, in
    order); None if empty."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    distinct = sorted(list(dict.fromkeys(tokens))[:MAX_TOKENS])
    if not distinct:
        return None
    total = np.zeros(dim, dtype=np.complex128)
    for token in distinct:
        total += _token_phasor(token, dim)
    return _quantise(np.angle(total))


def encode_phases(text: str, dim: int = DEFAULT_DIM) -> np.ndarray | None:
    """The HRR phases of ``text``; ``None`` when it has no token."""
    return encode_tokens(tokenize(text), dim)


def _quantise(phases: np.ndarray) -> np.ndarray:
    steps = np.rint(np.mod(phases, 2 * np.pi) / _SCALE).astype(np.int64) % _STEPS
    return steps.astype(np.float64) * _SCALE


def phases_to_vector(phases: np.ndarray) -> list[float]:
    """``[cos φ_1 … cos φ_dim, sin φ_1 … sin φ_dim]`` (2 * dim floats)."""
    return np.concatenate([np.cos(phases), np.sin(phases)]).tolist()


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """HRR similarity ``mean(cos(a - b))`` of two phase vectors, in [-1, 1]."""
    if a.shape != b.shape:
        raise ValueError(f"phase vectors differ in width: {a.shape[0]} and {b.shape[0]}")
    return float(np.mean(np.cos(a - b)))


def similarities(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Similarity of ``query`` (dim,) to each row of ``matrix`` (n, dim)."""
    if matrix.size == 0:
        return np.zeros(0)
    return np.cos(matrix - query).mean(axis=1)


def to_bytes(phases: np.ndarray) -> bytes:
    """Storage form: one little-endian uint16 step per phase."""
    return (np.rint(phases / _SCALE).astype(np.int64) % _STEPS).astype("<u2").tobytes()


def from_bytes(blob: bytes, dim: int) -> np.ndarray:
    """Inverse of :func:`to_bytes`."""
    steps = np.frombuffer(blob, dtype="<u2")
    if steps.shape[0] != dim:
        raise ValueError(f"stored HRR vector has {steps.shape[0]} phases, expected {dim}")
    return steps.astype(np.float64) * _SCALE
