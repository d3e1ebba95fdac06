"""Checkpointer backends: persist an agent's state per thread (see ``BaseCheckpointer``).

``MemoryCheckpointer`` and ``FileCheckpointer`` need nothing; the others are imported
on first access (module ``__getattr__``), and the ones whose library is an optional
dependency raise ImportError naming the extra when built without it:
``RedisCheckpointer`` (``redis``), ``S3Checkpointer`` (``s3``; alias ``S3Backend``),
``OpenSearchCheckpointer`` (``opensearch``), ``MySQLCheckpointer`` (``mysql``).
``PostgreSQLCheckpointer`` and ``MySQLCheckpointer`` are ORM-backed and need a
configured Django project. Every checkpointer has ``async aclose()`` and works as ``async with``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tulip_memory.backends.base import BaseCheckpointer
from tulip_memory.backends.file import FileCheckpointer
from tulip_memory.backends.memory import MemoryCheckpointer

if TYPE_CHECKING:
    from tulip_memory.backends.mysql import MySQLCheckpointer
    from tulip_memory.backends.opensearch import OpenSearchCheckpointer
    from tulip_memory.backends.postgresql import PostgreSQLCheckpointer
    from tulip_memory.backends.redis import RedisCheckpointer
    from tulip_memory.backends.s3 import S3Backend, S3Checkpointer

__all__ = [
    "BaseCheckpointer",
    "FileCheckpointer",
    "MemoryCheckpointer",
    "MySQLCheckpointer",
    "OpenSearchCheckpointer",
    "PostgreSQLCheckpointer",
    "RedisCheckpointer",
    "S3Backend",
    "S3Checkpointer",
]

_LAZY = {
    "RedisCheckpointer": "tulip_memory.backends.redis",
    "PostgreSQLCheckpointer": "tulip_memory.backends.postgresql",
    "MySQLCheckpointer": "tulip_memory.backends.mysql",
    "OpenSearchCheckpointer": "tulip_memory.backends.opensearch",
    "S3Backend": "tulip_memory.backends.s3",
    "S3Checkpointer": "tulip_memory.backends.s3",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
