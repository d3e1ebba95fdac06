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

DEFAULTS: dict[str, Any] = {
    # --- embeddings -------------------------------------------------------------
    # Dotted path of a BaseEmbedding subclass (or factory) used where no embedder
    # is passed explicitly (PgMemory(), the Celery workers' store); None means the HRR
    # text encoder. Checked by tulip_memory.E020-E021 and W020 (tulip_memory/checks/).
    "EMBEDDER": None,
    "EMBEDDER_OPTIONS": {},
    # --- PgMemory / tenancy -------------------------------------------------------
    # Width of the pgvector column. Without an embedder it is 2 * dim (HRR phases).
    "VECTOR_DIMENSIONS": 1024,
    # Build an HNSW index on the vector column at migrate time (widths <= 2000 only).
    # Off: PgMemory's searches sort each namespace exactly and never use it, and keeping
    # it up to date makes inserts 100-200x slower (docs/pg_store.md).
    "ANN_INDEX": False,
    # PostgreSQL text search configuration of PgMemory's lexical ranking: "english"
    # (Snowball stemming, English stop words), "simple" for mixed languages (no stemming,
    # no stop words), or any configuration of the database. Baked into the generated
    # tsvector column by migration 0006; checked by tulip_memory.E060/E061.
    "TEXT_SEARCH_CONFIG": "english",
    # PostgreSQL setting (GUC) that carries the tenant of the current transaction.
    "TENANT_SETTING": "tulip_memory.tenant",
    # Dotted path of a callable(request) -> str | None used by TenantMiddleware.
    # Who the request's tenant is: from the user's memberships by default; the header
    # resolver only behind an authenticating gateway (check --deploy warns: W011).
    "TENANT_RESOLVER": "tulip_memory.tenancy.middleware.resolve_tenant_from_membership",
    "TENANT_HEADER": "X-Tenant",
    # Database aliases the application reaches tenant tables through (as a role without
    # SUPERUSER/BYPASSRLS that does not own the tables): checked by tulip_memory.E010-W010.
    "TENANT_DATABASES": ["default"],
    # --- long-term memory manager -------------------------------------------------
    # What Celery workers build to run extraction jobs (dotted paths).
    "STORE": "tulip_memory.store.PgMemory",
    "STORE_OPTIONS": {},
    "EXTRACTOR": None,
    "MANAGER_OPTIONS": {},
    "CELERY_QUEUE": "tulip_memory",
    "EXTRACTION_LEASE_SECONDS": 60,
    "EXTRACTION_MAX_ATTEMPTS": 5,
    # Seconds one attempt at a job may run: past it the worker's heartbeat stops renewing
    # the namespace's lease (another worker takes the namespace over once it expires, the
    # attempt counts) and the worker, should its job ever return, saves nothing.
    "EXTRACTION_JOB_TIMEOUT_SECONDS": 900.0,
    # Seconds before the first retry of a failed extraction job; doubles per attempt.
    "EXTRACTION_RETRY_DELAY": 5.0,
    # Seconds a runnable job of a namespace nobody holds a live lease on waits before the
    # periodic sweep re-sends its queue's message (also that message's expiry).
    "EXTRACTION_RESEND_AFTER": 60.0,
    # --- retention (docs/operations.md; checked by tulip_memory.E090) ------------------
    # Hours after which a done extraction job's payload (the conversation) is purged by
    # the jobs sweep; 0: purged as the job finishes; None: kept.
    "JOB_PAYLOAD_PURGE_AFTER_HOURS": None,
    # Days after which finished (done or failed) extraction job rows are deleted; None: kept.
    "JOB_DELETE_AFTER_DAYS": None,
    # Checkpoints kept per thread by the checkpoint sweep (the newest N); None: all.
    "CHECKPOINT_KEEP_LAST": None,
    # Days without a new checkpoint after which a thread's checkpoints are deleted; None: kept.
    "CHECKPOINT_IDLE_DAYS": None,
    # The database aliases whose job and checkpoint tables the Celery sweep tasks clean up
    # (the expiry sweep takes PgMemory's STORE_OPTIONS["using"]).
    "SWEEP_DATABASES": ("default",),
    # Seconds between two runs of each periodic sweep (tulip_memory_schedule_sweeps).
    "SWEEP_INTERVALS": {
        "extraction_queues": 60,
        "expired_items": 300,
        "extraction_jobs": 3600,
        "checkpoints": 3600,
    },
    # --- checkpointers ------------------------------------------------------------
    # Extra providers for tulip_memory.registry: {"name": "dotted.path.Factory"}.
    "CHECKPOINTERS": {},
    # --- erasure (docs/operations.md, "Erasure") ----------------------------------
    # The key of a state's metadata (LangGraph: of the checkpoint's metadata) naming the
    # person a thread is about; checkpoints copy it into their indexed ``subject`` column.
    "SUBJECT_METADATA_KEY": "subject",
    # The labels between the tenant and the subject in the namespace of a subject's
    # memories: (tenant, *SUBJECT_NAMESPACE, subject), as a namespace_resolver such as
    # ``lambda run: (tenant, "users", run.metadata["subject"])`` writes them.
    "SUBJECT_NAMESPACE": ("users",),
    # --- chat model (tulip_memory.llm) ----------------------------------------------
    # One OpenAI-compatible chat-completions endpoint for extraction and summaries; the
    # keys of this dict are listed in tulip_memory/llm/config.py (LLM_DEFAULTS) and
    # docs/llm.md. The API key is read from the environment variable API_KEY_ENV names.
    "LLM": {},
}

# Keys whose values are dotted paths; `settings.import_setting(name)` imports them.
IMPORT_STRINGS = frozenset({"EMBEDDER", "TENANT_RESOLVER", "STORE", "EXTRACTOR"})


class TulipMemorySettings:
    """Lazy view over ``settings.TULIP_MEMORY`` with defaults."""

    def __init__(self, defaults: dict[str, Any], user: object = None) -> None:
        self._defaults = defaults
        # Given (settings_of): that dict, for good; otherwise read from Django's settings.
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
        if name.startswith("_") or name not in self._defaults:
            raise AttributeError(f"{SETTINGS_NAME} has no setting {name!r}")
        return self._user_settings().get(name, self._defaults[name])

    def unknown_keys(self) -> list[str]:
        """Keys of the project's dict that tulip_memory does not know (a likely typo)."""
        return sorted(set(self._user_settings()) - set(self._defaults))

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


settings = TulipMemorySettings(DEFAULTS)


def settings_of(tulip_memory: object) -> TulipMemorySettings:
    """A view like :data:`settings` over the ``TULIP_MEMORY`` dict given, with the same
    defaults: for helpers called from settings.py, where Django's settings are not
    configured yet (``TypeError`` when it is not a dict)."""
    return TulipMemorySettings(DEFAULTS, _as_dict(tulip_memory))


@receiver(setting_changed)
def _reload_settings(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        settings.reload()


def tenant_databases() -> list[str] | None:
    """``TENANT_DATABASES`` as a list when it is a list or tuple of strings, else None
    (E003). Aliases unknown to ``settings.DATABASES`` are kept (E003 names them): no
    command can name them, so no check ever looks at them."""
    value = settings.TENANT_DATABASES
    if isinstance(value, (list, tuple)) and all(isinstance(alias, str) for alias in value):
        return list(value)
    return None
