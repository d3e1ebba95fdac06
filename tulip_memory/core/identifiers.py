"""The one rule for names the layers store and look up by: tenants, namespace labels, keys, ids.

An identifier is a ``str`` that is not empty and holds no NUL character (PostgreSQL
text cannot hold one, so every backend refuses it alike) nor a lone surrogate (no
encoding can store one), optionally of bounded length
and not only whitespace. Each layer names its own argument in the error message.

The length limits of the ids the checkpoint layer stores live here too: both the
checkpointers (which validate) and the checkpoint models (whose columns must hold them)
read them from this one place.
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_ID_MAX_LENGTH",
    "THREAD_ID_MAX_LENGTH",
    "surrogate_at",
    "validate_identifier",
]

THREAD_ID_MAX_LENGTH = 255
CHECKPOINT_ID_MAX_LENGTH = 128


def surrogate_at(text: str) -> int | None:
    """The index of the first lone surrogate of ``text`` (UTF-8 cannot encode one: a
    surrogate pair is two of them in a str), or None when there is none."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def validate_identifier(
    value: object, what: str, *, max_length: int | None = None, allow_blank: bool = True
) -> str:
    """Return ``value`` if it is a valid identifier, else raise ValueError naming ``what``.

    ``allow_blank=False`` also refuses a value of only whitespace; ``max_length`` bounds
    the number of characters.
    """
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if not allow_blank and not value.strip():
        raise ValueError(f"{what} must not be only whitespace, got {value!r}")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    index = surrogate_at(value)
    if index is not None:
        raise ValueError(f"{what} must be valid Unicode: lone surrogate at index {index}")
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"{what} is {len(value)} characters long, over {max_length}")
    return value
