"""Settings for tulip_memory: one ``TULIP_MEMORY`` dict, read lazily.

``settings.NAME`` is the project's value or the default below; the cache is dropped on
``setting_changed``. Without configured Django settings the defaults are returned.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

SETTINGS_NAME = "TULIP_MEMORY"

# Each key is documented in docs/ (pg_store.md, manager.md, operations.md, llm.md).
DEFAULTS: dict[str, Any] = {
    # A BaseEmbedding (or factory) by dotted path; None: the HRR text encoder.
    "EMBEDDER": None,
    "EMBEDDER_OPTIONS": {},
    "VECTOR_DIMENSIONS": 1024,
    # Off: PgMemory's searches sort each namespace exactly, and the index slows inserts.
    "ANN_INDEX": False,
    "TEXT_SEARCH_CONFIG": "english",
    "TENANT_SETTING": "tulip_memory.tenant",
    # callable(request) -> str | None for TenantMiddleware; the header resolver only
    # behind an authenticating gateway (check --deploy warns: W011).
    "TENANT_RESOLVER": "tulip_memory.middleware.resolve_tenant_from_membership",
    "TENANT_HEADER": "X-Tenant",
    "TENANT_DATABASES": ["default"],
    # What Celery workers build to run extraction jobs.
    "STORE": "tulip_memory.store.PgMemory",
    "STORE_OPTIONS": {},
    "EXTRACTOR": None,
    "MANAGER_OPTIONS": {},
    "CELERY_QUEUE": "tulip_memory",
    "EXTRACTION_LEASE_SECONDS": 60,
    "EXTRACTION_MAX_ATTEMPTS": 5,
    "EXTRACTION_JOB_TIMEOUT_SECONDS": 900.0,
    "EXTRACTION_RETRY_DELAY": 5.0,
    "EXTRACTION_RESEND_AFTER": 60.0,
    # Retention: None keeps everything.
    "JOB_PAYLOAD_PURGE_AFTER_HOURS": None,
    "JOB_DELETE_AFTER_DAYS": None,
    "CHECKPOINT_KEEP_LAST": None,
    "CHECKPOINT_IDLE_DAYS": None,
    "SWEEP_DATABASES": ("default",),
    "SWEEP_INTERVALS": {
        "extraction_queues": 60,
        "expired_items": 300,
        "extraction_jobs": 3600,
        "checkpoints": 3600,
    },
    "CHECKPOINTERS": {},
    "SUBJECT_METADATA_KEY": "subject",
    "SUBJECT_NAMESPACE": ("users",),
    "LLM": {},
}

# Keys whose values are dotted paths; `settings.import_setting(name)` imports them.
IMPORT_STRINGS = frozenset({"EMBEDDER", "TENANT_RESOLVER", "STORE", "EXTRACTOR"})


class TulipMemorySettings:
    """Lazy view over ``settings.TULIP_MEMORY`` (or the dict ``user``) with the defaults."""

    def __init__(self, user: object = None) -> None:
        self._fixed = user is not None
        self._user: dict[str, Any] | None = _as_dict(user) if self._fixed else None

    def _user_settings(self) -> dict[str, Any]:
        if self._user is None:
            from django.conf import settings as django_settings

            if not django_settings.configured:
                return {}
            given = getattr(django_settings, SETTINGS_NAME, None)  # unset (or None): defaults
            self._user = {} if given is None else _as_dict(given)
        return self._user

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"{SETTINGS_NAME} has no setting {name!r}")
        return self._user_settings().get(name, DEFAULTS[name])

    def unknown_keys(self) -> list[str]:
        """Keys of the project's dict that tulip_memory does not know (a likely typo)."""
        return sorted(set(self._user_settings()) - set(DEFAULTS))

    def import_setting(self, name: str) -> Any:
        """Import the object a dotted-path setting names (None stays None)."""
        if name not in IMPORT_STRINGS:
            raise AttributeError(f"{SETTINGS_NAME}[{name!r}] is not a dotted-path setting")
        value = getattr(self, name)
        if value is None or not isinstance(value, str):
            return value
        return import_string(value)

    def reload(self) -> None:
        if not self._fixed:
            self._user = None


def _as_dict(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"settings.{SETTINGS_NAME} must be a dict, got {type(value).__name__}")
    return dict(value)


settings = TulipMemorySettings()


def settings_of(tulip_memory: object) -> TulipMemorySettings:
    """A view like :data:`settings` over the ``TULIP_MEMORY`` dict given, with the same
    defaults: for helpers called from settings.py, where Django's settings are not
    configured yet (``TypeError`` when it is not a dict)."""
    return TulipMemorySettings(_as_dict(tulip_memory))


@receiver(setting_changed)
def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        settings.reload()


def tenant_databases() -> list[str] | None:
    """``TENANT_DATABASES`` as a list when it is a list or tuple of strings, else None (E003)."""
    value = settings.TENANT_DATABASES
    if isinstance(value, (list, tuple)) and all(isinstance(alias, str) for alias in value):
        return list(value)
    return None
