"""System checks of what Celery workers build their memory manager from (E040-E043), and
E044: celery mode without a Celery app that has a broker.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterable
from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.core.numbers import is_int
from tulip_memory.retention.policy import retention_period

__all__ = ["check_celery_app", "check_manager_settings", "worker_start_errors"]

# Options a worker's manager may not take from MANAGER_OPTIONS: it sets them itself.
_WORKER_OWNED = frozenset({"store", "extract_fn", "extract_mode"})


def _check_imports(settings: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    try:
        store = settings.import_setting("STORE")
    except ImportError as exc:
        store = None
        errors.append(
            finding(
                "E040",
                f"TULIP_MEMORY['STORE'] cannot be imported: {exc}",
                "Name a store class by dotted path.",
            )
        )
    else:
        if store is not None and not callable(store):
            errors.append(
                finding(
                    "E040",
                    "TULIP_MEMORY['STORE'] is not callable",
                    "Name a store class or factory.",
                )
            )
    if not isinstance(settings.STORE_OPTIONS, dict):
        errors.append(
            finding(
                "E040",
                "TULIP_MEMORY['STORE_OPTIONS'] must be a dict",
                "Keyword arguments of the store.",
            )
        )
    elif store is not None and callable(store):
        errors.extend(_unknown_options("E040", "STORE_OPTIONS", settings.STORE_OPTIONS, store))
    try:
        extractor = settings.import_setting("EXTRACTOR")
    except ImportError as exc:
        errors.append(
            finding(
                "E041",
                f"TULIP_MEMORY['EXTRACTOR'] cannot be imported: {exc}",
                "Name an async function by dotted path, or None for the heuristic.",
            )
        )
    else:
        if extractor is not None and not inspect.iscoroutinefunction(extractor):
            errors.append(
                finding(
                    "E041",
                    "TULIP_MEMORY['EXTRACTOR'] is not an async function",
                    "async def extract(messages) -> list[Memory]",
                )
            )
    return errors


def _unknown_options(
    id_: str,
    setting: str,
    options: dict[str, Any],
    factory: Any,
    *,
    owned: frozenset[str] = frozenset(),
    on: str = "",
) -> list[checks.CheckMessage]:
    """``id_``: the keys of ``options`` (``TULIP_MEMORY[setting]``) that ``factory`` does not
    take (a typo would otherwise surface at the first extraction job, on a worker) or that
    are ``owned``."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): nothing to say
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return []
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = {p.name for p in parameters if p.kind in keyword} - owned
    unknown = sorted(set(options) - accepted)
    if not unknown:
        return []
    return [
        finding(
            id_,
            f"TULIP_MEMORY['{setting}'] has options that {factory.__qualname__} does not "
            f"take{on}: {unknown}",
            f"Accepted: {sorted(accepted)}",
        )
    ]


def _check_options(settings: Any) -> list[checks.CheckMessage]:
    from tulip_memory.manager.llm import LLMMemoryManager

    if not isinstance(settings.MANAGER_OPTIONS, dict):
        return [
            finding(
                "E042",
                "TULIP_MEMORY['MANAGER_OPTIONS'] must be a dict",
                "Keyword arguments of LLMMemoryManager.",
            )
        ]
    return _unknown_options(
        "E042",
        "MANAGER_OPTIONS",
        settings.MANAGER_OPTIONS,
        LLMMemoryManager,
        owned=_WORKER_OWNED,
        on=" on a worker",
    )


def _check_queue(settings: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    if not isinstance(settings.CELERY_QUEUE, str) or not settings.CELERY_QUEUE.strip():
        errors.append(
            finding(
                "E043",
                "TULIP_MEMORY['CELERY_QUEUE'] must be a non-empty string",
                "The queue workers consume (-Q).",
            )
        )
    for name, strict in (
        ("EXTRACTION_LEASE_SECONDS", True),
        ("EXTRACTION_RETRY_DELAY", False),
        ("EXTRACTION_RESEND_AFTER", True),
        ("EXTRACTION_JOB_TIMEOUT_SECONDS", True),
    ):
        try:  # finite and at most 100 years: the workers compute dates from it
            retention_period(getattr(settings, name), unit="seconds", strict=strict)
        except ValueError as exc:
            errors.append(finding("E043", f"TULIP_MEMORY['{name}'] {exc}", "Seconds."))
    attempts = settings.EXTRACTION_MAX_ATTEMPTS
    if not is_int(attempts) or attempts < 1:
        errors.append(
            finding(
                "E043",
                f"TULIP_MEMORY['EXTRACTION_MAX_ATTEMPTS'] must be an int >= 1, got {attempts!r}",
                "Attempts before a job is marked failed.",
            )
        )
    return errors


@registered()
def check_manager_settings(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E040-E043: the settings Celery workers build their memory manager from."""
    from tulip_memory.conf import settings

    return [*_check_imports(settings), *_check_options(settings), *_check_queue(settings)]


def worker_start_errors() -> list[checks.CheckMessage]:
    """The errors a Celery worker refuses to start on: E001 (``TULIP_MEMORY`` is not a
    dict), else E040-E043, and E050-E052 unless ``EXTRACTOR`` is set (the worker then
    never asks the chat model); those silenced by ``SILENCED_SYSTEM_CHECKS`` left out."""
    from tulip_memory.checks.llm import check_llm_settings
    from tulip_memory.checks.settings import check_settings
    from tulip_memory.conf import settings

    found = [message for message in check_settings() if message.id == "tulip_memory.E001"]
    if not found:
        found = check_manager_settings()
        if settings.EXTRACTOR is None:
            found += check_llm_settings()
    return [message for message in found if message.is_serious() and not message.is_silenced()]


@registered()
def check_celery_app(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """E044: celery mode is used, and Celery's current app has no broker configured."""
    from django.urls import get_resolver

    from tulip_memory.manager.extraction.modes import extract_modes_in_use
    from tulip_memory.manager.extraction.queue import app_without_a_broker

    # Import the views and their managers; a broken URLconf is Django's own check's finding.
    with contextlib.suppress(Exception):
        get_resolver().url_patterns  # noqa: B018
    if "celery" not in extract_modes_in_use():
        return []
    missing = app_without_a_broker()
    if missing is None:
        return []
    app, builtin = missing
    if builtin:
        problem = "the project's Celery app is not loaded"
    else:
        problem = "that app was loaded but given no broker (CELERY_BROKER_URL unset?)"
    return [
        finding(
            "E044",
            "A memory manager uses extract_mode='celery', but Celery's current app "
            f"({app.main!r}) has no broker_url: {problem}, so extraction jobs would be "
            "sent to Celery's default broker and stay pending.",
            "Add your project's celery.py (Celery(...), config_from_object("
            "'django.conf:settings', namespace='CELERY'), autodiscover_tasks()), import its "
            "app in your project package's __init__.py, and set CELERY_BROKER_URL "
            "(docs/manager.md, 'Celery in your project').",
        )
    ]
