"""The one rule for names the layers store and look up by: tenants, namespace labels, keys, ids.

An identifier is a ``str`` that is not empty and holds no NUL character (PostgreSQL
text cannot hold one, so every backend refuses it alike) nor a lone surrogate (no
encoding can store one), optionally of bounded length
and not only whitespace. Each layer names its own argument in the error message.
"""

from __future__ import annotations

__all__ = ["validate_identifier"]


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
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"{what} must be valid Unicode: lone surrogate at index {error.start}"
            ) from None
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"{what} is {len(value)} characters long, over {max_length}")
    return value
