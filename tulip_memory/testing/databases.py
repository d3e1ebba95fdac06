"""Test databases of a project that uses tulip_memory: two roles, as in production.

:func:`setup_test_databases` creates the database, both roles and the grants on a
superuser's server (``TULIP_TEST_ADMIN_URL``, ``DATABASE_URL`` or an embedded one) and
migrates through the owner alias, which Django's set-up as the application role cannot;
other aliases get Django's test databases. :func:`teardown_test_databases` drops ours.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from tulip_memory.postgres.roles import APP_ROLE, OWNER_ROLE
from tulip_memory.testing.postgres import (
    bootstrap_database,
    database_settings,
    drop_database,
    import_dj_database_url,
    start_embedded,
)

__all__ = ["TestDatabases", "admin_url", "setup_test_databases", "teardown_test_databases"]

# The rest (OPTIONS, CONN_MAX_AGE...) stays the alias's own.
_REPLACED = ("NAME", "USER", "PASSWORD", "HOST", "PORT")


@dataclass
class TestDatabases:
    """What :func:`setup_test_databases` changed, for :func:`teardown_test_databases`."""

    __test__ = False  # not a test case, whatever its name

    admin_url: str
    name: str
    saved: dict[str, dict[str, Any]] = field(default_factory=dict)
    django_config: list[Any] = field(default_factory=list)


def admin_url() -> str:
    """The superuser URL test databases are created with (see the module docstring)."""
    given = os.environ.get("TULIP_TEST_ADMIN_URL") or os.environ.get("DATABASE_URL")
    if given:
        return given
    return start_embedded(
        Path(tempfile.mkdtemp(prefix="tulip-test-pg-")) / "data", cleanup="delete"
    )


def _owner_alias(settings_by_alias: dict[str, dict[str, Any]]) -> str:
    default = settings_by_alias["default"]
    # An alias of the application role itself is not the owner's.
    candidates = [
        alias
        for alias, config in settings_by_alias.items()
        if alias != "default"
        and "postgresql" in config.get("ENGINE", "")
        and config.get("NAME") == default.get("NAME")
        and config.get("USER") != default.get("USER")
        and not (config.get("TEST") or {}).get("MIRROR")
    ]
    if not candidates:
        raise ImproperlyConfigured(
            "tulip_memory's test databases need the table owner's alias: add a second "
            "DATABASES entry for the same NAME whose USER owns the tables (e.g. 'owner'; "
            "see docs/testing.md). The 'default' alias is the application role."
        )
    return candidates[0]


def setup_test_databases(
    *, verbosity: int = 1, aliases: Iterable[str] | None = None
) -> TestDatabases:
    """Create and migrate the test database of ``default`` and its owner alias; the other
    ``aliases`` (None: all) get Django's own."""
    from django.core.management import call_command
    from django.db import connections
    from django.test.utils import setup_databases

    # Imported before anything is created, which would otherwise stay behind on failure.
    import_dj_database_url()
    by_alias = {alias: connections[alias].settings_dict for alias in connections}
    default = by_alias["default"]
    if "postgresql" not in default.get("ENGINE", ""):
        raise ImproperlyConfigured(
            "tulip_memory's test databases are for a PostgreSQL 'default' alias; "
            f"'default' uses {default.get('ENGINE')!r}."
        )
    owner_alias = _owner_alias(by_alias)
    name = (default.get("TEST") or {}).get("NAME") or f"test_{default['NAME']}"
    url = admin_url()
    app_role = default.get("USER") or APP_ROLE
    owner_role = by_alias[owner_alias].get("USER") or OWNER_ROLE
    if verbosity >= 1:
        sys.stderr.write(
            f"Creating test database {name!r} (owner {owner_role!r}, application {app_role!r})\n"
        )
    try:
        urls = bootstrap_database(
            url,
            name,
            owner=owner_role,
            app=app_role,
            recreate=True,
            app_can_truncate=True,
            owner_password=by_alias[owner_alias].get("PASSWORD") or None,
            app_password=default.get("PASSWORD") or None,
        )
    except Exception as exc:
        raise ImproperlyConfigured(
            f"tulip_memory could not create the test database {name!r} through "
            f"{_without_password(url)}: {type(exc).__name__}: {exc}. That URL "
            "(TULIP_TEST_ADMIN_URL or DATABASE_URL) must connect as a superuser to a "
            "PostgreSQL server with pgvector; unset both to use an embedded server."
        ) from exc
    state = TestDatabases(admin_url=url, name=name)
    for alias, role_url in (("default", urls.app), (owner_alias, urls.owner)):
        connection = connections[alias]
        connection.close()
        state.saved[alias] = {key: connection.settings_dict.get(key) for key in _REPLACED}
        parsed = database_settings(role_url)
        parsed["PASSWORD"] = state.saved[alias]["PASSWORD"] or ""
        connection.settings_dict.update({key: parsed[key] for key in _REPLACED})
    call_command(
        "migrate", database=owner_alias, verbosity=max(verbosity - 1, 0), interactive=False
    )
    others = {alias for alias in (aliases or set(by_alias)) if alias not in state.saved}
    if others:
        state.django_config = setup_databases(
            verbosity, interactive=False, aliases=dict.fromkeys(others, False)
        )
    return state


def teardown_test_databases(state: TestDatabases, *, verbosity: int = 1) -> None:
    """Drop the test database, restore the aliases' settings, tear down the others."""
    from django.db import connections
    from django.test.utils import teardown_databases

    if state.django_config:
        teardown_databases(state.django_config, verbosity=verbosity)
    for alias, saved in state.saved.items():
        connections[alias].close()
        connections[alias].settings_dict.update(saved)
    if verbosity >= 1:
        sys.stderr.write(f"Destroying test database {state.name!r}\n")
    drop_database(state.admin_url, state.name)


def _without_password(url: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
