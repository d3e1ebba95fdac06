"""pytest plugin (``-p tulip_memory.testing.pytest_plugin``): pytest-django's test database
with tulip_memory's two roles (docs/testing.md).

Registers :mod:`tulip_memory.testing.pytest_fixtures` once pytest is configured, so its
``django_db_setup`` wins over pytest-django's; one in your ``conftest.py`` still wins.
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
