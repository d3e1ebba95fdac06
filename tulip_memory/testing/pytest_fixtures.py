"""``django_db_setup`` (session scope), registered by :mod:`tulip_memory.testing.pytest_plugin`:
:func:`~tulip_memory.testing.databases.setup_test_databases`, dropped at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["django_db_setup"]


@pytest.fixture(scope="session")
def django_db_setup(
    request: Any, django_test_environment: None, django_db_blocker: Any
) -> Iterator[None]:
    from tulip_memory.testing.databases import setup_test_databases, teardown_test_databases

    verbosity = request.config.option.verbose
    with django_db_blocker.unblock():
        state = setup_test_databases(verbosity=verbosity)
    yield
    with django_db_blocker.unblock():
        teardown_test_databases(state, verbosity=verbosity)
