"""``TEST_RUNNER = "tulip_memory.testing.runner.TulipTestRunner"``: Django's DiscoverRunner
with the test databases of :func:`~tulip_memory.testing.databases.setup_test_databases`.
"""

from __future__ import annotations

from typing import Any

from django.test.runner import DiscoverRunner

from tulip_memory.testing.databases import (
    TestDatabases,
    setup_test_databases,
    teardown_test_databases,
)

__all__ = ["TulipTestRunner"]


class TulipTestRunner(DiscoverRunner):
    """A ``DiscoverRunner`` whose PostgreSQL test database has the owner and app roles."""

    # The old config Django passes from one to the other is this runner's own state.
    def setup_databases(self, **kwargs: Any) -> TestDatabases:  # type: ignore[override]
        return setup_test_databases(verbosity=self.verbosity, aliases=kwargs.get("aliases"))

    def teardown_databases(  # type: ignore[override]
        self, old_config: TestDatabases, **kwargs: Any
    ) -> None:
        teardown_test_databases(old_config, verbosity=self.verbosity)
