"""Test bed: migrations run once per session as the owner role; tests run as the app role.

pytest-django's own database creation is replaced (``django_db_setup``): the databases
were created by tests/settings.py, and migrations must run as the owner role on
PostgreSQL, which the application role (``default``) is not.

Async tests that touch the ORM must use ``@pytest.mark.django_db(transaction=True)``:
Django runs async ORM calls on another thread, outside the test's transaction.
"""

from __future__ import annotations

import os

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# The browser tests' fixtures (Playwright on the system's Chromium), for every test folder.
pytest_plugins = ["tests.admin.browser"]

# No per-example deadline and no "too slow" health check: CI runs on 2 shared cores, and
# property tests here talk to real databases. Tests may still set their own max_examples.
hypothesis_settings.register_profile(
    "tulip_memory", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("tulip_memory")


def _mysql_admin(*statements: str) -> None:
    import MySQLdb

    config = settings.DATABASES["mysql"]
    conn = MySQLdb.connect(
        host=config["HOST"] or "127.0.0.1",
        port=int(config["PORT"] or 3306),
        user=config["USER"],
        password=config["PASSWORD"] or "",
    )
    try:
        cursor = conn.cursor()
        for statement in statements:
            cursor.execute(statement.format(name=config["NAME"]))
    finally:
        conn.close()


@pytest.fixture(scope="session")
def django_db_setup(django_db_blocker):
    with django_db_blocker.unblock():
        call_command("migrate", database="owner", verbosity=0, interactive=False)
        if os.environ.get("TULIP_TEST_BACKEND") == "citus":
            call_command("tulip_memory_distribute", database="owner", verbosity=0)
        _mysql_admin(
            "DROP DATABASE IF EXISTS `{name}`", "CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
        )
        call_command("migrate", database="mysql", verbosity=0, interactive=False)
    yield
    with django_db_blocker.unblock():
        connections["mysql"].close()
        _mysql_admin("DROP DATABASE IF EXISTS `{name}`")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item (the browser tests screenshot failures);
    after a failed teardown, lift the database blocks it left."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.when == "teardown" and report.failed:
        _lift_database_blocks()


def _lift_database_blocks() -> None:
    """One failed test stays one failure.

    Django blocks the databases a test did not declare by wrapping their connections'
    methods, and lifts the blocks in ``tearDownClass``, which pytest-django calls only
    after the flush of the test's tables. When that flush raises (a worker process still
    writing, a deadlock), the blocks stay on this thread's connections and every later
    test on those databases fails with ``DatabaseOperationForbidden``.
    """
    from django.test.testcases import _DatabaseFailure

    for connection in connections.all(initialized_only=True):
        for name, value in list(vars(connection).items()):
            method = value
            while isinstance(method, _DatabaseFailure):
                method = method.wrapped
            if method is not value:
                setattr(connection, name, method)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Browser tests: allow the ORM on the test's thread beside Playwright's event loop.

    Playwright's sync API keeps an asyncio loop on the test's thread; the test's own ORM
    calls (fixtures, checks, pytest-django's flush after the test) are still plain
    synchronous code. Set for the whole protocol of such a test (every fixture's setup
    and teardown) and only for it.
    """
    if "page" not in getattr(item, "fixturenames", ()):
        yield
        return
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def sent_events():
    """Every ``memory_event`` sent during the test, with its sender."""
    from tests.event_recorder import recording

    with recording() as recorder:
        yield recorder


@pytest.fixture
def server_folder():
    """A new folder for an embedded server's data, outside pytest's ``tmp_path``: run by root,
    the server runs as the ``embedded_postgres`` user, and every pytest session makes its
    base temporary folder (shared by the sessions of one user) private again, shutting the
    server out of its own data."""
    import shutil
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="tulip-server-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
