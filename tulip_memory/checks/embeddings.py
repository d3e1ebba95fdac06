"""System checks of the configured embedder (ids tulip_memory.E020-E021, W020).

* E020 ``EMBEDDER`` cannot be built: not importable, ``EMBEDDER_OPTIONS`` not a dict of
  its keyword arguments, or it builds something that is not a ``BaseEmbedding``;
* E021 the configured encoder's width (the embedder's ``dimension``; without one, HRR's
  ``2 * STORE_OPTIONS["dim"]`` when ``STORE`` is PgMemory) differs from
  ``VECTOR_DIMENSIONS``, the width of PgMemory's vector column: ``PgMemory()`` would
  refuse to start, and so would every worker;
* W020 (tagged ``database``: ``check --database <alias>``) stored rows carry vectors of
  another encoder than the configured one — written before the embedder changed — counted
  by source; they are found by their words only until ``manage.py tulip_memory_reembed``
  rebuilds them. A warning, not an error: nothing is lost or wrong, recall is degraded,
  and ``migrate`` (which runs database checks) must not be blocked mid-change.

Row-level security shows an application role no row without a pinned tenant, so W020
counts what the alias's role sees: every tenant through a role with BYPASSRLS (or a
superuser), nothing through the application role. ``tulip_memory_reembed --dry-run
--tenant <t>`` counts one tenant under its own binding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks

__all__ = ["check_embedder_settings", "check_embedding_sources", "check_sources_on"]


def check_embedder_settings(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E020-E021: the embedder of ``TULIP_MEMORY`` can be built and fits the column."""
    from tulip_memory.conf import settings
    from tulip_memory.store.pg_reembed import settings_encoder, stores_hrr_in_pg

    try:
        encoder = settings_encoder()
    except Exception as exc:  # any failure to build it is the finding
        return [
            checks.Error(
                f"TULIP_MEMORY['EMBEDDER'] ({settings.EMBEDDER!r}) cannot be built with "
                f"EMBEDDER_OPTIONS {settings.EMBEDDER_OPTIONS!r}: {type(exc).__name__}: {exc}",
                hint="Name a BaseEmbedding subclass (or a factory) by dotted path, with a "
                "dict of its keyword arguments in EMBEDDER_OPTIONS (docs/store.md).",
                id="tulip_memory.E020",
            )
        ]
    if encoder.embedder is None and not stores_hrr_in_pg():
        return []
    wanted = settings.VECTOR_DIMENSIONS
    if encoder.width == wanted:
        return []
    origin = (
        f"the HRR encoding of PgMemory(dim={encoder.dim}) is {encoder.width} wide"
        if encoder.embedder is None
        else f"the embedder {settings.EMBEDDER!r} is {encoder.width} dimensions wide"
    )
    return [
        checks.Error(
            f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {wanted!r}, but {origin}: PgMemory() "
            "and the Celery workers would refuse to start.",
            hint=f"Set VECTOR_DIMENSIONS = {encoder.width}; an existing vector column is "
            "then altered to that width (tulip_memory.E014 says how) and its rows "
            "re-embedded with manage.py tulip_memory_reembed.",
            id="tulip_memory.E021",
        )
    ]


def check_sources_on(connection: Any, alias: str, source: str) -> list[checks.CheckMessage]:
    """W020 for the rows ``connection`` sees, against the configured ``source``."""
    from tulip_memory.store.pg_reembed import column_width, foreign_sources

    if column_width(connection) is None:
        return []  # not migrated yet
    found = foreign_sources(connection, source)
    if not found:
        return []
    total = sum(found.values())
    by_source = ", ".join(f"{count} of {name!r}" for name, count in found.items())
    return [
        checks.Warning(
            f"Database alias {alias!r}: {total} stored item(s) carry vectors of another "
            f"encoder than the configured {source!r} ({by_source}); searches find them by "
            "their words only.",
            hint="Run python manage.py tulip_memory_reembed --database "
            f"{alias} --tenant <tenant> ... to re-embed them.",
            id="tulip_memory.W020",
        )
    ]


def check_embedding_sources(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W020 on the PostgreSQL aliases asked for (``check --database``)."""
    from django.db import connections

    from tulip_memory.store.pg_reembed import settings_encoder

    if not databases:
        return []
    try:
        source = settings_encoder().source
    except Exception:  # reported by E020
        return []
    messages: list[checks.CheckMessage] = []
    for alias in databases:
        connection = connections[alias]
        if connection.vendor == "postgresql":
            messages.extend(check_sources_on(connection, alias, source))
    return messages
