"""Helpers of the migration-operation tests: connections outside settings.DATABASES."""

from __future__ import annotations

import importlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db import connections
from django.db.migrations.loader import MigrationLoader

from tulip_memory.testing.postgres import database_settings


@contextmanager
def connect(
    url: str, alias: str, vendor_module: str = "django.db.backends.postgresql.base"
) -> Iterator[Any]:
    """A connection to ``url`` outside settings.DATABASES (closed on exit)."""
    settings_dict = dict(connections["default"].settings_dict)
    parsed = database_settings(url)
    settings_dict.update({key: parsed[key] for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT")})
    wrapper = importlib.import_module(vendor_module).DatabaseWrapper(settings_dict, alias=alias)
    try:
        yield wrapper
    finally:
        wrapper.close()


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


@contextmanager
def scratch_database(prefix: str, owner: str | None = None) -> Iterator[str]:
    """A database made by the superuser for one test (owned by ``owner``, else by the
    superuser), dropped on exit; yields its name."""
    import psycopg

    admin_url = os.environ["TULIP_TEST_ADMIN_URL"]
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
    try:
        yield name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def state_after_0001(connection: Any) -> Any:
    """The project state after tulip_memory's first migration."""
    return MigrationLoader(connection).project_state(("tulip_memory", "0001_initial"))
