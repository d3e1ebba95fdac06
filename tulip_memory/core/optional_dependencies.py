"""Importing an optional dependency, failing with the ``pip install 'tulip-memory[<extra>]'``
to run rather than a bare ModuleNotFoundError, and a package's names imported on first use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["import_optional", "lazy_attributes"]


def import_optional(module: str, extra: str, needed_by: str = "this checkpointer") -> ModuleType:
    """Import an optional dependency, or raise ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{needed_by} needs the optional dependency that provides {module!r}: "
            f"pip install 'tulip-memory[{extra}]'"
        ) from exc


def lazy_attributes(package: str, sources: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``sources`` from
    its module on first access (and keeps it)."""

    def __getattr__(name: str) -> Any:
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
