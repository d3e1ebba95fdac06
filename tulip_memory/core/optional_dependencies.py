"""Importing an optional dependency, with an error that names the extra to install.

Backends whose library is an optional extra of tulip-memory (redis, boto3, opensearch-py,
mysqlclient), and the helper that keeps the extraction sweep's schedule in
django-celery-beat's tables, import it through :func:`import_optional` when they are
built or called, so that a missing library fails with
``pip install 'tulip-memory[<extra>]'`` instead of a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_optional"]


def import_optional(module: str, extra: str, needed_by: str = "this checkpointer") -> ModuleType:
    """Import an optional dependency, or raise ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{needed_by} needs the optional dependency that provides {module!r}: "
            f"pip install 'tulip-memory[{extra}]'"
        ) from exc
