"""Long-lived connections no request reaches: the LangGraph saver's and store's.

:class:`SharedConnection` is one connection used by every calling thread in turn;
:func:`on_worker_thread` runs a call on a worker thread's own connection. Both check the
connection before each call, as Django does at a request's start.
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["SharedConnection", "on_worker_thread"]

T = TypeVar("T")


def _check(connection: Any) -> None:
    """Close a connection the server dropped (after an error, or always with
    ``CONN_HEALTH_CHECKS``) so that the call reconnects; a healthy one is kept whatever
    ``CONN_MAX_AGE``."""
    suspect = connection.errors_occurred or connection.settings_dict.get("CONN_HEALTH_CHECKS")
    if connection.connection is not None and not connection.in_atomic_block and suspect:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


def on_worker_thread(using: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` after checking this thread's connection to ``using``."""
    from django.db import connections

    _check(connections[using])
    return func(*args, **kwargs)


def _forget(ref: weakref.ref[SharedConnection]) -> None:
    shared = ref()
    if shared is not None:
        shared._forget()


class SharedConnection:
    """A connection to ``using`` shared by every thread that calls :meth:`run`, one call
    at a time, in the calling thread (no hop to a worker thread, which would wait for the
    GIL). Not for a thread running an event loop."""

    def __init__(self, using: str) -> None:
        self.using = using
        self._lock = threading.RLock()  # re-entrant: a call may make another
        self._connection: Any = None
        self._pid = 0
        # A forked child starts afresh: the parent's lock may be held by a thread the
        # child does not have.
        os.register_at_fork(after_in_child=functools.partial(_forget, weakref.ref(self)))

    def _forget(self) -> None:
        self._lock = threading.RLock()
        self._connection = None
        self._pid = 0

    def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in this thread, with the shared connection as
        ``connections[using]`` for the call's duration."""
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
