"""Writer locks: one session-level database lock per (table, tenant, thread).

PostgreSQL advisory locks, MySQL/MariaDB named locks. Session-level so that one can span
several transactions, and taken outside them: on MariaDB a named lock released before
COMMIT would let the next writer read the old rows. :class:`WriterLocks` is mixed into
:class:`~tulip_memory.tenancy.database.TenantDatabase`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from typing import ClassVar

from tulip_memory.exceptions import CheckpointError

__all__ = ["WriterLocks"]

LOCK_WAIT_SECONDS = 60


def _still_locked(thread_id: str) -> str:
    return f"thread {thread_id!r} stayed locked by another writer for {LOCK_WAIT_SECONDS} s"


class WriterLocks:
    """The writer locks of the table :attr:`lock_table` on the alias ``using``."""

    using: str
    lock_table: ClassVar[str] = ""

    def _lock_name(self, tenant: str, thread_id: str) -> str:
        key = json.dumps([self.lock_table, tenant, thread_id], ensure_ascii=False)
        # MariaDB lock names are at most 64 characters.
        return "tulip_memory:" + hashlib.blake2b(key.encode(), digest_size=20).hexdigest()

    def _try_lock(self, name: str, wait_seconds: int, *, transaction_level: bool = False) -> bool:
        """Take the named lock, waiting up to ``wait_seconds``; held until released (on
        PostgreSQL with ``transaction_level``: until the transaction ends)."""
        from django.db import connections

        connection = connections[self.using]
        with connection.cursor() as cursor:
            if connection.vendor != "postgresql":
                cursor.execute("SELECT GET_LOCK(%s, %s)", [name, wait_seconds])
                return bool(cursor.fetchone()[0])
            # PostgreSQL's blocking pg_advisory_lock has no timeout of its own: poll.
            function = "pg_try_advisory_xact_lock" if transaction_level else "pg_try_advisory_lock"
            deadline, sleep = time.monotonic() + wait_seconds, 0.0005
            while True:
                cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [name])
                if cursor.fetchone()[0]:
                    return True
                if time.monotonic() >= deadline:
                    return False
                time.sleep(sleep)
                sleep = min(sleep * 2, 0.01)

    def _try_shared_transaction_lock(self, name: str) -> bool:
        """Take the named lock in shared mode until the transaction ends (PostgreSQL),
        without waiting: False while a writer holds it."""
        from django.db import connections

        with connections[self.using].cursor() as cursor:
            cursor.execute(
                "SELECT pg_try_advisory_xact_lock_shared(hashtextextended(%s, 0))", [name]
            )
            return bool(cursor.fetchone()[0])

    def _unlock(self, name: str) -> None:
        from django.db import connections

        connection = connections[self.using]
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [name])
            else:
                cursor.execute("SELECT RELEASE_LOCK(%s)", [name])

    def lock_threads(self, tenant: str, thread_ids: list[str]) -> list[str]:
        """Take the writer locks of ``thread_ids`` for an erasure, in one order (no deadlock):
        until the transaction ends on PostgreSQL (returns ``[]``), else the names to pass to
        :meth:`unlock_threads` after it. CheckpointError when one stays locked too long."""
        from django.db import connections

        transaction_level = connections[self.using].vendor == "postgresql"
        held: list[str] = []
        try:
            for name, thread_id in sorted({(self._lock_name(tenant, t), t) for t in thread_ids}):
                if not self._try_lock(name, LOCK_WAIT_SECONDS, transaction_level=transaction_level):
                    raise CheckpointError(_still_locked(thread_id))
                if not transaction_level:
                    held.append(name)
        except BaseException:
            self.unlock_threads(held)
            raise
        return held

    def unlock_threads(self, names: list[str]) -> None:
        for name in names:
            self._unlock(name)

    @contextlib.contextmanager
    def _writer_lock(self, tenant: str, thread_id: str) -> Iterator[None]:
        name = self._lock_name(tenant, thread_id)
        if not self._try_lock(name, LOCK_WAIT_SECONDS):
            raise CheckpointError(_still_locked(thread_id))
        try:
            yield
        finally:
            self._unlock(name)
