"""System checks of the configured embedder: E020-E022 (it builds, its width matches
``VECTOR_DIMENSIONS``), W020 (``database``: stored vectors of another encoder).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.checks.settings import vector_dimensions

__all__ = ["check_embedder_settings", "check_embedding_sources", "check_sources_on"]


@registered()
def check_embedder_settings(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E020-E022: the embedder of ``TULIP_MEMORY`` can be built, works and fits the column."""
    from tulip_memory.conf import settings
    from tulip_memory.store.pg.reembed import settings_encoder, stores_hrr_in_pg

    try:
        encoder = settings_encoder()
    except Exception as exc:  # any failure to build it is the finding
        return [
            finding(
                "E020",
                f"TULIP_MEMORY['EMBEDDER'] ({settings.EMBEDDER!r}) cannot be built with "
                f"EMBEDDER_OPTIONS {settings.EMBEDDER_OPTIONS!r}: {type(exc).__name__}: {exc}",
                "Name a BaseEmbedding subclass (or a factory) by dotted path, with a "
                "dict of its keyword arguments in EMBEDDER_OPTIONS (docs/store.md).",
            )
        ]
    found: list[checks.CheckMessage] = []
    problem = encoder.embedder.configuration_problem() if encoder.embedder is not None else None
    if problem is not None:
        found.append(
            finding(
                "E022",
                f"TULIP_MEMORY['EMBEDDER'] ({settings.EMBEDDER!r}) cannot work: {problem}",
                "Set that variable in the environment of every process (web, Celery "
                "workers), or point the embedder at a local server (docs/store.md).",
            )
        )
    if encoder.embedder is None and not stores_hrr_in_pg():
        return found
    wanted = vector_dimensions()
    if wanted is None or encoder.width == wanted:
        return found  # None: not a width (E002)
    origin = (
        f"the HRR encoding of PgMemory(dim={encoder.dim}) is {encoder.width} wide"
        if encoder.embedder is None
        else f"the embedder {settings.EMBEDDER!r} is {encoder.width} dimensions wide"
    )
    return [
        *found,
        finding(
            "E021",
            f"TULIP_MEMORY['VECTOR_DIMENSIONS'] is {wanted!r}, but {origin}: PgMemory() "
            "and the Celery workers would refuse to start.",
            f"Set VECTOR_DIMENSIONS = {encoder.width}; an existing vector column is "
            "then altered to that width (tulip_memory.E014 says how) and its rows "
            "re-embedded with manage.py tulip_memory_reembed.",
        ),
    ]


def check_sources_on(connection: Any, alias: str, source: str) -> list[checks.CheckMessage]:
    """W020 for the rows of ``alias`` (its ``connection``), against the configured ``source``."""
    from tulip_memory.store.pg.reembed import (
        bypasses_row_level_security,
        column_width,
        foreign_sources,
    )

    if column_width(connection) is None:
        return []  # not migrated yet
    tenants: list[str] = []
    if bypasses_row_level_security(connection):
        found = foreign_sources(connection, source)
    else:
        found, tenants = _foreign_sources_tenant_by_tenant(connection, alias, source)
    if not found:
        return []
    total = sum(found.values())
    by_source = ", ".join(f"{count} of {name!r}" for name, count in found.items())
    where, which = "", "--tenant <tenant> ..."
    if tenants:
        more = ", ..." if len(tenants) > 5 else ""
        where = f" of {len(tenants)} tenant(s) ({', '.join(map(repr, tenants[:5]))}{more})"
        which = " ".join(f"--tenant {shlex.quote(t)}" for t in tenants[:5]) + more[1:]
    return [
        finding(
            "W020",
            f"Database alias {alias!r}: {total} stored item(s){where} carry vectors of another "
            f"encoder than the configured {source!r} ({by_source}); searches find them by "
            "their words only.",
            f"Run python manage.py tulip_memory_reembed --database {alias} {which} "
            "to re-embed them (after the ALTER TABLE of tulip_memory.E014, if reported).",
        )
    ]


def _foreign_sources_tenant_by_tenant(
    connection: Any, alias: str, source: str
) -> tuple[dict[str, int], list[str]]:
    """:func:`foreign_sources` summed over the registry's tenants, each in a transaction
    pinned to it; and the tenants that have such rows."""
    from tulip_memory.models.tenants import Tenant
    from tulip_memory.store.pg.reembed import foreign_sources
    from tulip_memory.tenancy.context import tenant_atomic

    if Tenant._meta.db_table not in connection.introspection.table_names():
        return {}, []  # migrated before the registry: no tenant to visit
    found: Counter[str] = Counter()
    tenants = []
    for tenant in Tenant.objects.using(alias).names():
        with tenant_atomic(tenant, using=alias):
            counts = foreign_sources(connection, source, tenant)
        if counts:
            tenants.append(tenant)
        found.update(counts)
    return dict(sorted(found.items())), tenants


@registered(checks.Tags.database)
def check_embedding_sources(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W020 on the PostgreSQL aliases asked for (``check --database``)."""
    from tulip_memory.checks.tenancy import postgres_connections
    from tulip_memory.store.pg.reembed import settings_encoder

    if not databases:
        return []
    try:
        source = settings_encoder().source
    except Exception:  # reported by E020
        return []
    # An alias that cannot be reached is reported once, by E015.
    return [
        message
        for alias, connection, problem in postgres_connections(databases)
        if problem is None
        for message in check_sources_on(connection, alias, source)
    ]
