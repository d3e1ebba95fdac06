"""The one rule for numeric arguments: a bool is not a number here, though Python counts
``True`` as the int 1; :func:`check_int` also bounds it and names the argument."""

from __future__ import annotations

from numbers import Real
from typing import Any, TypeGuard

__all__ = ["check_int", "check_number", "is_int", "is_number"]


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[Real]:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_int(value: object, name: str, low: int = 1, high: int | None = None) -> int:
    """``value`` if it is an int from ``low`` to ``high`` (unbounded: None), else
    ValueError naming ``name``."""
    if not is_int(value) or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise ValueError(f"{name} must be an int {bounds}, got {value!r}")
    return value


def check_number(
    value: Any, name: str, *, integer: bool = False, low: float = 0, strict: bool = False
) -> Any:
    """``value`` if it is a number (an int if ``integer``) ``>= low`` (``> low`` if
    ``strict``), else ValueError naming ``name``."""
    if not (is_int if integer else is_number)(value) or value < low or (strict and value == low):
        kind = "an int" if integer else "a number"
        raise ValueError(f"{name} must be {kind} {'>' if strict else '>='} {low:g}, got {value!r}")
    return value
