"""Input validation shared by every store: one ``ValueError`` naming the argument and the
problem, before any write. The helpers return what a store writes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from tulip_memory.core.identifiers import surrogate_at, validate_identifier
from tulip_memory.core.namespaces import validate_namespace, validate_namespace_prefix
from tulip_memory.core.numbers import is_int, is_number
from tulip_memory.core.paging import validate_limit

__all__ = [
    "PreparedPut",
    "batch_items",
    "decode_json",
    "encode_metadata",
    "encode_value",
    "prepare_batch",
    "prepare_put",
    "validate_embedder",
    "validate_embedder_vector",
    "validate_embedding",
    "validate_expected_versions",
    "validate_key",
    "validate_key_list",
    "validate_limit",
    "validate_metadata_filter",
    "validate_namespace",
    "validate_namespace_prefix",
    "validate_namespaces",
    "validate_query",
    "validate_threshold",
    "validate_ttl",
]


class PreparedPut(NamedTuple):
    """One validated write: the namespace, the key and the JSON texts of value and metadata."""

    namespace: tuple[str, ...]
    key: str
    value_json: str
    metadata_json: str


def validate_namespaces(namespaces: object) -> list[tuple[str, ...]]:
    """A sequence of namespaces (``search_many``); a bare tuple namespace is refused."""
    if isinstance(namespaces, (str, bytes)) or not isinstance(namespaces, Sequence):
        raise ValueError("namespaces must be a sequence of namespace tuples")
    if namespaces and all(isinstance(label, str) for label in namespaces):
        raise ValueError(
            "namespaces must be a sequence of namespace tuples, got one namespace; "
            "wrap it in a list"
        )
    return [validate_namespace(ns, name=f"namespaces[{i}]") for i, ns in enumerate(namespaces)]


def validate_key(key: object, *, name: str = "key") -> str:
    """Return ``key`` if it is a non-empty string without NUL."""
    return validate_identifier(key, name)


def validate_key_list(keys: object) -> list[tuple[tuple[str, ...], str]]:
    """``get_batch`` input: a list of ``(namespace, key)`` pairs."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise ValueError("keys must be a list of (namespace, key) pairs")
    pairs = []
    for index, pair in enumerate(keys):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise ValueError(f"keys[{index}] must be a (namespace, key) pair")
        pairs.append(
            (
                validate_namespace(pair[0], name=f"keys[{index}] namespace"),
                validate_key(pair[1], name=f"keys[{index}] key"),
            )
        )
    return pairs


def validate_expected_versions(
    expected_versions: object,
) -> dict[tuple[tuple[str, ...], str], int | None]:
    """``compare_and_put_batch`` input: ``{(namespace, key): version or None}``."""
    if not isinstance(expected_versions, Mapping):
        raise ValueError("expected_versions must be a dict of (namespace, key) -> version or None")
    pairs = validate_key_list(list(expected_versions))
    checked: dict[tuple[tuple[str, ...], str], int | None] = {}
    for pair, version in zip(pairs, expected_versions.values(), strict=True):
        if version is not None and (not is_int(version) or version < 0):
            raise ValueError(
                f"expected_versions[{pair!r}] must be a version (an int >= 0) or None, "
                f"got {version!r}"
            )
        checked[pair] = version
    return checked


# An escaped NUL in JSON text: "\u0000" preceded by an even number of backslashes.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


MAX_JSON_DEPTH = 128
"""How deeply values, metadata and filters may nest (lists and dicts); deeper is refused."""


def _check_structure(obj: Any, name: str) -> None:
    """Refuse containers nested deeper than :data:`MAX_JSON_DEPTH`, and a dict two of whose
    keys are one in JSON (``1`` and ``"1"``): one entry would be lost."""
    # Each entry: the container, its depth and where it is (None: the argument itself,
    # else (where its parent is, its key or index)), a path built only for an error.
    stack: list[tuple[Any, int, Any]] = [(obj, 1, None)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                _check_json_keys(item, name, where)
            children: Any = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{name} is nested more than {MAX_JSON_DEPTH} levels deep")
        stack.extend(
            (child, depth + 1, (where, step))
            for step, child in children
            if isinstance(child, (dict, list, tuple))
        )


def _check_json_keys(mapping: dict[Any, Any], name: str, where: Any) -> None:
    """ValueError naming the key of ``mapping`` that JSON writes as the text of another."""
    seen: dict[str, Any] = {}
    for key in mapping:
        # What json.dumps writes for the key: a str as it is, another scalar as its JSON.
        text = key if isinstance(key, str) else json.dumps(key)
        if text in seen:
            steps: list[str] = []  # the keys and indexes leading to ``mapping``
            while where is not None:
                where, step = where
                steps.append(f"[{step!r}]")
            raise ValueError(
                f"{name}{''.join(reversed(steps))} has the keys {seen[text]!r} and {key!r}, "
                f"which are both {text!r} in JSON: one of them would be lost"
            )
        seen[text] = key


def encode_value(value: Any, *, name: str = "value") -> str:
    """The JSON text of ``value``; ``ValueError`` if it is not strict JSON (no NaN/Infinity)."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:  # far deeper than the limit (a circular value raises ValueError)
        raise ValueError(f"{name} is nested more than {MAX_JSON_DEPTH} levels deep") from None
    except (ValueError, TypeError) as exc:  # NaN / Infinity, circular reference, bad type
        raise ValueError(f"{name} is not JSON-serialisable: {exc}") from None
    _check_structure(value, name)
    if "\\u0000" in text and _JSON_NUL.search(text):
        raise ValueError(f"{name} must not contain a NUL character (\\u0000)")
    _check_unicode(text, name)
    return text


def _check_unicode(text: str, name: str) -> None:
    """Refuse a lone surrogate: no store can encode one as UTF-8."""
    if surrogate_at(text) is not None:
        raise ValueError(f"{name} must be valid Unicode (it holds a lone surrogate)")


def encode_metadata(metadata: object, *, name: str = "metadata") -> str:
    """The JSON text of ``metadata`` (``None`` means ``{}``); it must be a dict with str keys."""
    if metadata is None:
        return "{}"
    if not isinstance(metadata, dict):
        raise ValueError(f"{name} must be a dict or None, got {type(metadata).__name__}")
    for field in metadata:
        if not isinstance(field, str):
            raise ValueError(f"{name} keys must be strings, got {field!r}")
    return encode_value(metadata, name=name)


def decode_json(text: str) -> Any:
    """Inverse of :func:`encode_value` / :func:`encode_metadata` (a fresh object each call)."""
    return json.loads(text)


def prepare_put(
    namespace: object, key: object, value: Any, metadata: object, *, where: str = ""
) -> PreparedPut:
    """Validate and encode one write; ``where`` prefixes messages (``"items[3] "``)."""
    return PreparedPut(
        validate_namespace(namespace, name=f"{where}namespace"),
        validate_key(key, name=f"{where}key"),
        encode_value(value, name=f"{where}value"),
        encode_metadata(metadata, name=f"{where}metadata"),
    )


def batch_items(items: object) -> list[Any]:
    """The items of a batch as a list: a generator is read once, here, so that a store
    validates and writes the same items."""
    if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise ValueError("items must be a list of (namespace, key, value, metadata) tuples")
    return list(items)


def prepare_batch(items: object) -> list[PreparedPut]:
    """Validate every ``(namespace, key, value, metadata)`` of a batch before any is written."""
    prepared = []
    for index, item in enumerate(batch_items(items)):
        if not isinstance(item, tuple) or len(item) not in (3, 4):
            raise ValueError(
                f"items[{index}] must be a (namespace, key, value, metadata) tuple, got {item!r}"
            )
        namespace, key, value, *rest = item
        metadata = rest[0] if rest else None
        prepared.append(prepare_put(namespace, key, value, metadata, where=f"items[{index}] "))
    return prepared


def validate_embedder(embedder: Any) -> Any:
    """``embedder`` if it is None or a ``BaseEmbedding`` (anything with ``embed_batch``)."""
    if embedder is not None and not callable(getattr(embedder, "embed_batch", None)):
        raise TypeError(
            f"embedder must be a BaseEmbedding (with embed_batch), got {type(embedder)!r}"
        )
    return embedder


def validate_embedding(
    embedding: object, *, dimension: int | None = None, name: str = "embedding"
) -> list[float]:
    """A non-empty list of finite floats, not all zero, ``dimension`` wide when given."""
    values = validate_embedder_vector(embedding, dimension=dimension, name=name)
    if values is None:
        raise ValueError(f"{name} must not be all zeros (cosine similarity is undefined)")
    return values


def validate_embedder_vector(
    vector: object, *, dimension: int | None, name: str = "the embedder's vector"
) -> list[float] | None:
    """An embedder's ``vector`` as a non-empty list of finite floats, ``dimension`` wide when
    given, or None when it is all zeros (the text is then ranked by its words)."""
    if isinstance(vector, (str, bytes, dict)) or not isinstance(vector, Iterable):
        raise ValueError(f"{name} must be a sequence of numbers, got {type(vector).__name__}")
    values: list[float] = []
    for index, number in enumerate(vector):
        if not is_number(number):
            raise ValueError(f"{name}[{index}] must be a number, got {number!r}")
        as_float = float(number)
        if not math.isfinite(as_float):
            raise ValueError(f"{name}[{index}] must be finite, got {as_float}")
        values.append(as_float)
    if not values:
        raise ValueError(f"{name} must not be empty")
    if dimension is not None and len(values) != dimension:
        raise ValueError(f"{name} has {len(values)} dimensions, the store expects {dimension}")
    return values if any(values) else None


def validate_query(query: object) -> str | None:
    """``None`` or a string (a blank string means "no query")."""
    if query is not None and not isinstance(query, str):
        raise ValueError(f"query must be a str or None, got {type(query).__name__}")
    if query:
        _check_unicode(query, "query")
    return query


def validate_threshold(threshold: object) -> float | None:
    """``None`` or a finite number in [-1, 1] (a cosine similarity)."""
    if threshold is None:
        return None
    if not is_number(threshold):
        raise ValueError(f"threshold must be a number or None, got {type(threshold).__name__}")
    value = float(threshold)
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"threshold must be between -1 and 1, got {threshold}")
    return value


def validate_metadata_filter(metadata_filter: object) -> dict[str, Any]:
    """``None`` or a dict of metadata fields to values that must match exactly."""
    if metadata_filter is None:
        return {}
    if not isinstance(metadata_filter, dict):
        raise ValueError(
            f"metadata_filter must be a dict or None, got {type(metadata_filter).__name__}"
        )
    encode_metadata(metadata_filter, name="metadata_filter")
    return metadata_filter


MAX_TTL = timedelta(days=36_500)
"""The longest ttl a store accepts (about a hundred years)."""


def validate_ttl(ttl: object, *, name: str = "ttl") -> timedelta | None:
    """``None`` (never expires), or the ttl (seconds or ``timedelta``) as a ``timedelta``
    of at least a microsecond and at most :data:`MAX_TTL`."""
    if ttl is None:
        return None
    if isinstance(ttl, timedelta):
        step = ttl
    elif not is_number(ttl):
        raise ValueError(
            f"{name} must be a number of seconds or a timedelta, got {type(ttl).__name__}"
        )
    else:
        seconds = float(ttl)
        if not math.isfinite(seconds):
            raise ValueError(f"{name} must be a finite number of seconds, got {ttl!r}")
        if seconds <= 0:
            raise ValueError(f"{name} must be positive, got {ttl!r}")
        if seconds < 1e-6:
            raise ValueError(f"{name} must be at least one microsecond, got {ttl!r} seconds")
        if seconds > MAX_TTL.total_seconds():
            raise ValueError(f"{name} must be at most {MAX_TTL.days} days, got {ttl!r} seconds")
        step = timedelta(seconds=seconds)
    if step <= timedelta(0):
        raise ValueError(f"{name} must be positive, got {ttl!r}")
    if step > MAX_TTL:
        raise ValueError(f"{name} must be at most {MAX_TTL.days} days, got {ttl!r}")
    return step
