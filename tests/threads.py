"""Work run on another thread of the test process, on that thread's own database
connections (so it commits apart from the test's), its exception re-raised on the test's
thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


class OnItsOwnConnections(threading.Thread):
    """A thread running ``work``; :meth:`join_and_raise` re-raises what it raised."""

    def __init__(self, work: Callable[[], object]) -> None:
        super().__init__()
        self.work = work
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # re-raised on the test's thread
            self.error = exc
        finally:
            connections.close_all()

    def join_and_raise(self, timeout: float | None = None) -> None:
        self.join(timeout)
        if self.error is not None:
            raise self.error
