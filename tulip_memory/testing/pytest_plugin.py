"""pytest plugin: pytest-django's test database with tulip_memory's two roles.

Enable it with ``-p tulip_memory.testing.pytest_plugin`` (e.g. in ``addopts`` of
``pytest.ini``/``pyproject.toml``) or ``pytest_plugins = ["tulip_memory.testing.pytest_plugin"]``
in the root ``conftest.py``. It replaces pytest-django's ``django_db_setup`` (session
scope) with :func:`tulip_memory.testing.databases.setup_test_databases`: a fresh
database on a superuser's server (or an embedded one), migrated by the owner alias, the
tests run through ``default`` as the application role. See docs/testing.md.

The fixture lives in :mod:`tulip_memory.testing.pytest_fixtures`, registered when pytest
is configured, after every plugin pytest loads by itself: so it takes precedence over
pytest-django's fixture of the same name however this plugin was enabled. A
``django_db_setup`` of your own ``conftest.py`` still takes precedence over it.
"""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["pytest_configure"]

FIXTURES = "tulip_memory.testing.pytest_fixtures"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: Any) -> None:
    if not config.pluginmanager.has_plugin(FIXTURES):
        config.pluginmanager.import_plugin(FIXTURES)
