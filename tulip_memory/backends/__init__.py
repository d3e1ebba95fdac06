"""Checkpointer backends: persist an agent's state per thread (``BaseCheckpointer``).

All but the memory and file ones are imported on first access; one whose library is an
optional extra raises ImportError naming it when built without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tulip_memory.backends.base import BaseCheckpointer
from tulip_memory.backends.file import FileCheckpointer
from tulip_memory.backends.memory import MemoryCheckpointer
from tulip_memory.core.optional_dependencies import lazy_attributes

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

__getattr__ = lazy_attributes(
    __name__,
    {
        "RedisCheckpointer": "tulip_memory.backends.redis",
        "PostgreSQLCheckpointer": "tulip_memory.backends.postgresql",
        "MySQLCheckpointer": "tulip_memory.backends.mysql",
        "OpenSearchCheckpointer": "tulip_memory.backends.opensearch",
        "S3Backend": "tulip_memory.backends.s3",
        "S3Checkpointer": "tulip_memory.backends.s3",
    },
)


def __dir__() -> list[str]:
    return sorted(__all__)
