"""Namespaces: the one validation rule and the text path they are stored under.

A namespace is a non-empty tuple of identifiers, none only whitespace; its first label is
the tenant wherever a store isolates tenants. Stored as a ``/``-joined path with ``\\`` and
``/`` escaped, so a prefix query is ``LIKE 'path/%'``. Pure Python.
"""

from __future__ import annotations

from tulip_memory.core.identifiers import validate_identifier

__all__ = [
    "NAMESPACE_SEPARATOR",
    "Namespace",
    "decode_namespace",
    "encode_namespace",
    "validate_namespace",
    "validate_namespace_prefix",
]

Namespace = tuple[str, ...]

NAMESPACE_SEPARATOR = "/"
_ESCAPE = "\\"
_ESCAPED_SEPARATOR = _ESCAPE + NAMESPACE_SEPARATOR


def _validate_labels(labels: tuple[object, ...], name: str) -> None:
    for index, label in enumerate(labels):
        validate_identifier(label, f"{name}[{index}]", allow_blank=False)


def validate_namespace(namespace: object, *, name: str = "namespace") -> Namespace:
    """Return ``namespace`` if it is a non-empty tuple of valid labels, else ValueError."""
    if not isinstance(namespace, tuple):
        raise ValueError(
            f"{name} must be a tuple of strings, got {type(namespace).__name__} {namespace!r:.80}"
        )
    if not namespace:
        raise ValueError(f"{name} must not be an empty tuple")
    _validate_labels(namespace, name)
    return namespace


def validate_namespace_prefix(prefix: object, *, name: str = "prefix") -> Namespace:
    """A namespace prefix: ``None`` (everything) or a possibly empty tuple of labels."""
    if prefix is None:
        return ()
    if not isinstance(prefix, tuple):
        raise ValueError(f"{name} must be a tuple of strings or None, got {type(prefix).__name__}")
    _validate_labels(prefix, name)
    return prefix


def encode_namespace(namespace: Namespace) -> str:
    """The namespace as one prefix-safe text path (``\\`` and ``/`` escaped)."""
    return NAMESPACE_SEPARATOR.join(
        label.replace(_ESCAPE, _ESCAPE * 2).replace(NAMESPACE_SEPARATOR, _ESCAPED_SEPARATOR)
        for label in namespace
    )


def decode_namespace(path: str) -> Namespace:
    """Inverse of :func:`encode_namespace`."""
    labels: list[str] = []
    current: list[str] = []
    chars = iter(path)
    for char in chars:
        if char == _ESCAPE:
            current.append(next(chars, ""))
        elif char == NAMESPACE_SEPARATOR:
            labels.append("".join(current))
            current = []
        else:
            current.append(char)
    labels.append("".join(current))
    return tuple(labels)
