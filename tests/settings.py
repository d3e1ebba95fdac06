"""Settings of the test suite: the example project's, on a fresh test database.

In the pytest process: ``DATABASE_URL``, when set, must connect as a superuser to a
PostgreSQL that has pgvector; otherwise an embedded PostgreSQL 18 + pgvector is started
in a temporary folder (deleted at exit). Either way a fresh ``tulip_test`` database is
created with the owner and application roles (tulip_memory.testing.postgres), and the
application role's URL is exported as ``DATABASE_URL`` so that processes the tests start
(Celery workers) import these settings and reach the same database.

``TULIP_TEST_BACKEND=citus`` runs the suite on a Citus cluster instead: the existing one whose
coordinator ``TULIP_CITUS_URL`` reaches (a superuser's URL to a database where its workers
are joined, e.g. ``postgres``), or else a coordinator and two workers of the embedded
PostgreSQL, Citus built into it by ``TULIP_CITUS_BUILD`` (default: ``shared/citus/build.sh``
beside the repository; ``make test-citus``).
"""

import os
import tempfile
from pathlib import Path

from tulip_memory.testing.postgres import bootstrap_database, database_settings, start_embedded

if os.environ.get("TULIP_TEST_DATABASES_READY") != "1":
    if os.environ.get("TULIP_TEST_BACKEND") == "citus":
        from tests.citus_cluster import cluster_database

        _admin_url, _urls = cluster_database(
            "tulip_test",
            url=os.environ.get("TULIP_CITUS_URL") or None,
            build_script=Path(
                os.environ.get("TULIP_CITUS_BUILD")
                or Path(__file__).resolve().parents[2] / "shared" / "citus" / "build.sh"
            ),
        )
    else:
        _admin_url = os.environ.get("DATABASE_URL") or start_embedded(
            Path(tempfile.mkdtemp(prefix="tulip-pg-")) / "data", cleanup="delete"
        )
        _urls = bootstrap_database(_admin_url, "tulip_test", recreate=True, app_can_truncate=True)
    os.environ.update(
        # One MariaDB database per test session, so concurrent runs never collide.
        MYSQL_URL=os.environ.get(
            "MYSQL_URL", f"mysql://root@127.0.0.1:3306/tulip_test_{os.getpid()}"
        ),
        DATABASE_URL=_urls.app,
        DATABASE_OWNER_URL=_urls.owner,
        TULIP_TEST_ADMIN_URL=_admin_url,
        TULIP_TEST_DATABASES_READY="1",
    )

from example_project.settings import *  # noqa: F403
from example_project.settings import DATABASES, INSTALLED_APPS

# django-celery-beat (the `beat` extra): schedule_sweep_in_database writes its tables.
INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat"]

# MariaDB of this machine kind, for the MySQL checkpointer (tests create the database).
DATABASES["mysql"] = database_settings(
    os.environ["MYSQL_URL"],
    OPTIONS={"charset": "utf8mb4"},
)

# The application role again, on an alias that allows prepared statements (as one with no
# transaction-mode pooler in front of it may): PgMemory prepares its search there and plans
# it generically. The store contract suite runs on both aliases ("pg", "pg-prepared").
DATABASES["prepared"] = {
    **DATABASES["default"],
    "OPTIONS": {**DATABASES["default"].get("OPTIONS", {}), "prepare_threshold": 0},
    "TEST": {"MIRROR": "default"},
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
