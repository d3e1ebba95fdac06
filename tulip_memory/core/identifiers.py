"""The one rule for names stored and looked up by (tenants, namespace labels, keys, ids): a
non-empty ``str`` without NUL or lone surrogate, optionally bounded and not only
whitespace; plus the length limits the checkpointers and their columns share.
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
    """The index of the first lone surrogate of ``text`` (UTF-8 cannot encode one), or None."""
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
    """``value`` if it is an identifier (``allow_blank=False``: not only whitespace; at most
    ``max_length`` characters), else ValueError naming ``what``."""
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
