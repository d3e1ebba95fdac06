"""System checks of ``TEXT_SEARCH_CONFIG``: E060 not a configuration name; E061
(``database``) unknown to the database, or not the one ``search_vector`` was generated with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.postgres.operations import text_search_config

__all__ = ["check_text_search_config", "check_text_search_databases"]

_GENERATED_WITH = re.compile(r"to_tsvector\('([^']+)'::regconfig")


@registered()
def check_text_search_config(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """tulip_memory.E060: the setting is not a text search configuration name."""
    try:
        text_search_config()
    except ValueError as exc:
        return [
            finding(
                "E060", str(exc), "Use 'english' (the default) or 'simple' for mixed languages."
            )
        ]
    return []


def _check_alias(alias: str, connection: Any, config: str) -> list[checks.CheckMessage]:
    from tulip_memory.models.store import MemoryItem

    name = config.rsplit(".", maxsplit=1)[-1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = %s)", [name])
        known = cursor.fetchone()[0]
        cursor.execute(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d "
            "JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
            "WHERE d.adrelid = to_regclass(%s) AND a.attname = 'search_vector'",
            [MemoryItem._meta.db_table],
        )
        row = cursor.fetchone()
    if not known:
        return [
            finding(
                "E061",
                f"TULIP_MEMORY['TEXT_SEARCH_CONFIG'] is {config!r}, which database alias "
                f"{alias!r} does not know.",
                "SELECT cfgname FROM pg_ts_config lists the configurations.",
            )
        ]
    found = _GENERATED_WITH.search(row[0]) if row else None
    stored = found.group(1) if found else None
    if stored is not None and stored.rsplit(".", maxsplit=1)[-1] != name:
        return [
            finding(
                "E061",
                f"TULIP_MEMORY['TEXT_SEARCH_CONFIG'] is {config!r}, but the search_vector "
                f"column of database alias {alias!r} was generated with {stored!r}: queries "
                "and stored items would be analysed differently.",
                "Set it back, or regenerate the column: manage.py migrate tulip_memory "
                "0004, then manage.py migrate (recomputes every row).",
            )
        ]
    return []


@registered(checks.Tags.database)
def check_text_search_databases(
    app_configs: Iterable[Any] | None = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """tulip_memory.E061 for the aliases of ``TENANT_DATABASES`` asked for."""
    from tulip_memory.checks.tenancy import tenant_connections

    try:
        config = text_search_config()
    except ValueError:
        return []  # E060 says so
    # An alias that cannot be reached is reported once, by E015.
    return [
        error
        for alias, connection, problem in tenant_connections(databases)
        if problem is None
        for error in _check_alias(alias, connection, config)
    ]
