"""tulip_memory.testing.databases refuses what cannot work, changing nothing.

(The good path — a fresh site's tests under the plugin and the runner — is
tests/testing/test_user_project.py.)
"""

from __future__ import annotations

import os
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from tulip_memory.testing.databases import _owner_alias, admin_url, setup_test_databases


def test_the_owner_alias_is_the_other_postgresql_alias_of_the_same_database():
    settings = {alias: connections[alias].settings_dict for alias in connections}
    assert _owner_alias(settings) == "owner"
    # An alias of the application role itself (here "prepared": other connection options,
    # a test mirror of default) is never taken for the owner's, wherever it is listed.
    assert settings["prepared"]["USER"] == settings["default"]["USER"]
    first = {"default": settings["default"], "prepared": settings["prepared"], **settings}
    assert _owner_alias(first) == "owner"
    owner = settings.pop("owner")
    with pytest.raises(ImproperlyConfigured, match="need the table owner's alias"):
        _owner_alias(settings)
    # Nor is a test mirror of default, whatever its role (a replica's, say).
    replica = {**owner, "TEST": {"MIRROR": "default"}}
    with pytest.raises(ImproperlyConfigured, match="need the table owner's alias"):
        _owner_alias({**settings, "replica": replica})


def test_the_admin_url_comes_from_the_environment_first(monkeypatch):
    monkeypatch.setenv("TULIP_TEST_ADMIN_URL", "postgresql://admin@db/postgres")
    assert admin_url() == "postgresql://admin@db/postgres"
    monkeypatch.delenv("TULIP_TEST_ADMIN_URL")
    monkeypatch.setenv("DATABASE_URL", "postgresql://ci@db/postgres")
    assert admin_url() == "postgresql://ci@db/postgres"


@pytest.mark.django_db
def test_a_server_url_without_superuser_rights_is_refused_and_nothing_changes(monkeypatch):
    before = {alias: dict(connections[alias].settings_dict) for alias in ("default", "owner")}
    app_url = os.environ["DATABASE_URL"].replace("tulip_app@", "tulip_app:secret@", 1)
    monkeypatch.setenv("TULIP_TEST_ADMIN_URL", app_url)
    with pytest.raises(ImproperlyConfigured, match="must connect as a superuser") as raised:
        setup_test_databases(verbosity=0)
    assert "secret" not in str(raised.value)  # the password is not shown
    assert {alias: dict(connections[alias].settings_dict) for alias in before} == before


def test_without_dj_database_url_set_up_names_the_extra_before_creating_anything(monkeypatch):
    """A base install (no `embedded` extra) with DATABASE_URL set: dj-database-url is
    missing. Set-up stops at once, naming the extra, before a database or a role exists."""
    from tulip_memory.testing import databases, postgres

    created: list[str] = []

    def create(*args, **kwargs):
        created.append("created")
        raise AssertionError("set-up created the test database before it could use it")

    monkeypatch.setitem(sys.modules, "dj_database_url", None)  # import fails
    monkeypatch.setenv("TULIP_TEST_ADMIN_URL", "postgresql://ci@db.invalid/postgres")
    monkeypatch.setattr(databases, "bootstrap_database", create)
    monkeypatch.setattr(databases, "start_embedded", create)
    with pytest.raises(ImportError, match=r"pip install 'tulip-memory\[embedded\]'"):
        setup_test_databases(verbosity=0)
    assert created == []
    with pytest.raises(ImportError, match=r"pip install 'tulip-memory\[embedded\]'"):
        postgres.database_settings("postgresql://ci@db.invalid/postgres")
