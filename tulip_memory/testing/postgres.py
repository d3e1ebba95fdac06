"""An embedded PostgreSQL (with pgvector) and the two-role layout tulip_memory expects, for
test suites: the public path of :mod:`tulip_memory.postgres.embedded` (docs/testing.md).
"""

from __future__ import annotations

from tulip_memory.postgres import embedded
from tulip_memory.postgres.embedded import *  # noqa: F403

__all__ = [name for name in embedded.__all__ if name not in ("pg_ctl", "postgres_binary")]
