"""A Django database alias used in transactions pinned to one tenant.

:class:`TenantDatabase` is what the ORM-backed checkpointers
(:mod:`tulip_memory.backends.orm`) and the ORM delta storage
(:mod:`tulip_memory.delta.orm`) share: the alias ``using`` (its vendor checked when
built), the tenant (fixed by the constructor, else the one bound by
:func:`~tulip_memory.tenancy.context.tenant_context` at call time) and :meth:`TenantDatabase._run`,
which runs blocking ORM work off the event loop (:meth:`~TenantDatabase._run_sync`: in the
caller's thread, for sync callers such as LangGraph's sync saver API) in one transaction opened by
:func:`~tulip_memory.tenancy.context.tenant_atomic`. On PostgreSQL that transaction is pinned to
the tenant, so row-level security shows and accepts only that tenant's rows. A call made
while another tenant is bound raises :class:`~tulip_memory.exceptions.TenantError`.

For the long-lived connections of the LangGraph integration: :class:`SharedConnection`
(the saver's, used by its callers' threads in turn) and :func:`on_worker_thread` (the
store's worker thread), both checked before each call as Django checks a connection at a
request's start.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async

from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.exceptions import CheckpointError, ConfigurationError, TenantError

__all__ = ["SharedConnection", "TenantDatabase", "on_worker_thread"]

T = TypeVar("T")

# How long a writer waits for a thread another writer holds before giving up.
_LOCK_WAIT_SECONDS = 60


def _still_locked(thread_id: str) -> str:
    return f"thread {thread_id!r} stayed locked by another writer for {_LOCK_WAIT_SECONDS} s"


def _check(connection: Any) -> None:
    """Check a long-lived connection that no request reaches, as Django checks one at a
    request's start.

    Django checks a connection as each request starts and ends; a connection the server
    dropped (a restart, an idle timeout) would otherwise fail the next call. A connection
    that saw an error, or any connection when the alias sets ``CONN_HEALTH_CHECKS``, is
    tested (``SELECT 1``) and closed if unusable, so that the call reconnects. Unlike
    ``close_old_connections``, a healthy connection is kept whatever ``CONN_MAX_AGE``: it
    is kept on purpose.
    """
    suspect = connection.errors_occurred or connection.settings_dict.get("CONN_HEALTH_CHECKS")
    if connection.connection is not None and not connection.in_atomic_block and suspect:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


def on_worker_thread(using: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``func`` on a long-lived worker thread of its own (the LangGraph store's sync
    API) after checking the thread's connection to ``using`` (see :func:`_check`)."""
    from django.db import connections

    _check(connections[using])
    return func(*args, **kwargs)


def _forget(ref: weakref.ref[SharedConnection]) -> None:
    shared = ref()
    if shared is not None:
        shared._forget()


class SharedConnection:
    """A connection to the alias ``using`` of one object's own (the LangGraph saver's),
    used by every thread that calls it, one call at a time.

    :meth:`run` runs a call in the calling thread, with this connection as the thread's
    ``connections[using]`` for the call's duration (as Django's ``LiveServerThread``
    shares its connections), then puts the thread's own back. A lock makes the calls take
    turns: the connection is never in two statements or transactions at once, and the
    calls of one thread of LangGraph's run in the order they are made. No hop to a worker
    thread: such a hop waits for the GIL while the caller's other threads run (LangGraph
    runs a graph's nodes and its saver's calls in threads of its own), ~0.8 ms a call
    measured. The connection is checked before each call (:func:`_check`); one made before
    a fork is left to the parent, and the child makes its own. A thread running an event
    loop cannot call it (Django refuses blocking database calls there).
    """

    def __init__(self, using: str) -> None:
        self.using = using
        self._lock = threading.RLock()  # re-entrant: a call may make another
        self._connection: Any = None
        self._pid = 0
        # A child process starts afresh: the parent's connection and lock (held, maybe,
        # by a thread the child does not have) stay the parent's.
        os.register_at_fork(after_in_child=functools.partial(_forget, weakref.ref(self)))

    def _forget(self) -> None:
        self._lock = threading.RLock()
        self._connection = None
        self._pid = 0

    def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in this thread, on the shared connection."""
        from django.db import connections

        with self._lock:
            if self._connection is None or self._pid != os.getpid():
                self._connection = connections.create_connection(self.using)
                self._connection.inc_thread_sharing()
                self._pid = os.getpid()
            own = connections[self.using]
            connections[self.using] = self._connection
            try:
                _check(self._connection)
                return func(*args)
            finally:
                connections[self.using] = own


class TenantDatabase:
    """A Django database alias of one vendor, used in tenant-pinned transactions."""

    vendor: ClassVar[str] = ""  # "postgresql", "mysql" (MariaDB too); "" accepts any
    driver: ClassVar[str | None] = None  # module of an optional database driver...
    extra: ClassVar[str] = ""  # ...and the tulip-memory extra that installs it

    def __init__(self, using: str = "default", *, tenant: str | None = None) -> None:
        from django.db import connections

        from tulip_memory.tenancy.context import validate_tenant

        if not isinstance(using, str) or not using:
            raise ValueError(f"using must be a Django database alias, got {using!r}")
        if using not in connections.settings:
            raise ConfigurationError(
                f"{type(self).__name__}: no database alias {using!r} in settings.DATABASES "
                f"(known: {sorted(connections.settings)})"
            )
        if tenant is not None:
            validate_tenant(tenant)
        if self.driver:
            import_optional(self.driver, self.extra)
        engine = connections.settings[using]["ENGINE"]
        if self.vendor:
            actual = connections[using].vendor
            if actual != self.vendor:
                raise ConfigurationError(
                    f"{type(self).__name__} needs a {self.vendor} database, but alias "
                    f"{using!r} is {actual} ({engine})"
                )
        self.using = using
        self.tenant = tenant

    def __repr__(self) -> str:
        return f"<{type(self).__name__} using={self.using!r}>"

    def event_tenant(self) -> str | None:
        """The tenant events name: the fixed one, else the bound one (``None``: neither)."""
        from tulip_memory.tenancy.context import current_tenant

        return self.tenant if self.tenant is not None else current_tenant()

    def _resolve_tenant(self) -> str:
        """The tenant of a call: the fixed one, else the bound one (TenantError if they differ)."""
        from tulip_memory.tenancy.context import current_tenant

        bound = current_tenant()
        if self.tenant is not None and bound is not None and bound != self.tenant:
            # Code bound to one tenant would otherwise reach another's rows through an
            # object built for it.
            raise TenantError(
                f"{type(self).__name__} is fixed to tenant {self.tenant!r} but tenant "
                f"{bound!r} is bound"
            )
        if self.tenant is None and bound is None:
            raise TenantError(
                "no tenant: pass one to the constructor, or bind one with tenant_context() "
                "or TenantMiddleware"
            )
        return self.tenant if self.tenant is not None else bound  # type: ignore[return-value]

    async def _run(self, func: Callable[..., T], *args: Any, lock: str | None = None) -> T:
        """Run ``func(tenant, *args)`` in a transaction pinned to the tenant, off the loop.

        With ``lock`` (a thread id), the transaction runs under the thread's writer lock
        (see :meth:`_writer_lock`), taken before it starts and released after it ends.
        """
        tenant = self._resolve_tenant()
        return await sync_to_async(self._in_transaction)(tenant, func, args, lock)

    def _run_sync(self, func: Callable[..., T], *args: Any, lock: str | None = None) -> T:
        """:meth:`_run` for blocking callers (sync code, never inside an event loop)."""
        return self._in_transaction(self._resolve_tenant(), func, args, lock)

    def _in_transaction(
        self, tenant: str, func: Callable[..., T], args: tuple[Any, ...], lock: str | None
    ) -> T:
        from tulip_memory.tenancy.context import tenant_atomic

        with contextlib.ExitStack() as stack:
            if lock is not None:
                stack.enter_context(self._writer_lock(tenant, lock))
            with tenant_atomic(tenant, using=self.using):
                return func(tenant, *args)

    # -- writer locks ------------------------------------------------------------------
    #
    # A session-level database lock per (table, tenant, thread): PostgreSQL advisory
    # locks, MySQL/MariaDB named locks. Session-level (not transaction-level) so that
    # one can span several transactions, and taken outside them: on MariaDB a named
    # lock released before COMMIT would let the next writer read the old rows.

    lock_table: ClassVar[str] = ""  # the table whose writers the lock serialises

    def _lock_name(self, tenant: str, thread_id: str) -> str:
        key = json.dumps([self.lock_table, tenant, thread_id], ensure_ascii=False)
        # MariaDB lock names are at most 64 characters.
        return "tulip_memory:" + hashlib.blake2b(key.encode(), digest_size=20).hexdigest()

    def _try_lock(self, name: str, wait_seconds: int, *, transaction_level: bool = False) -> bool:
        """Take the named lock on this thread's connection, waiting up to ``wait_seconds``
        (on PostgreSQL until the transaction ends with ``transaction_level``, else until
        released)."""
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
        """Take the named lock in shared mode until the transaction ends (PostgreSQL only).

        Shared holders exclude the session-level (exclusive) writer lock and nothing else.
        Not waited for: False when an exclusive holder is at work.
        """
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
        """Take the writer locks of ``thread_ids`` (in one order: two callers cannot
        deadlock), waiting for the writers at work, for a change made outside the
        checkpointer (an erasure) that its writers must not overlap.

        On PostgreSQL they are transaction-level: held until the current transaction
        ends; the list returned is empty. On MySQL/MariaDB named locks are session-level:
        the names returned must be released with :meth:`unlock_threads` once the
        transaction has ended. CheckpointError when a thread stays locked by a writer for
        ``_LOCK_WAIT_SECONDS`` (the named locks taken so far are released first).
        """
        from django.db import connections

        transaction_level = connections[self.using].vendor == "postgresql"
        held: list[str] = []
        try:
            for name, thread_id in sorted({(self._lock_name(tenant, t), t) for t in thread_ids}):
                if not self._try_lock(
                    name, _LOCK_WAIT_SECONDS, transaction_level=transaction_level
                ):
                    raise CheckpointError(_still_locked(thread_id))
                if not transaction_level:
                    held.append(name)
        except BaseException:
            self.unlock_threads(held)
            raise
        return held

    def unlock_threads(self, names: list[str]) -> None:
        """Release the session-level locks :meth:`lock_threads` returned."""
        for name in names:
            self._unlock(name)

    @contextlib.contextmanager
    def _writer_lock(self, tenant: str, thread_id: str) -> Iterator[None]:
        """Hold the thread's writer lock (blocking: for work done in one call)."""
        name = self._lock_name(tenant, thread_id)
        if not self._try_lock(name, _LOCK_WAIT_SECONDS):
            raise CheckpointError(_still_locked(thread_id))
        try:
            yield
        finally:
            self._unlock(name)
