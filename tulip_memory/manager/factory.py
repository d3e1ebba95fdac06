"""The memory manager an extraction worker builds from ``TULIP_MEMORY`` (``STORE``,
``EXTRACTOR``, ``MANAGER_OPTIONS``), once per process and again after the setting changes.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from tulip_memory.manager.llm import LLMMemoryManager

__all__ = ["build_memory_manager_from_settings", "build_store_from_settings"]


def _takes_embedder(factory: Any) -> bool:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return "embedder" in parameters


def build_store_from_settings() -> Any:
    """The store ``STORE`` (+ ``STORE_OPTIONS``) names, with the configured embedder."""
    from tulip_memory.conf import settings
    from tulip_memory.embeddings import get_embedder

    store_factory = settings.import_setting("STORE")
    options: dict[str, Any] = dict(settings.STORE_OPTIONS)
    if "embedder" not in options and _takes_embedder(store_factory):
        options["embedder"] = get_embedder()
    return store_factory(**options)


@functools.cache
def build_memory_manager_from_settings() -> LLMMemoryManager:
    """The manager this process runs extraction jobs with, built once from ``TULIP_MEMORY``."""
    from tulip_memory.conf import settings

    options = {**settings.MANAGER_OPTIONS, "extract_mode": "inline"}  # the worker runs the job
    return LLMMemoryManager(
        build_store_from_settings(), extract_fn=settings.import_setting("EXTRACTOR"), **options
    )


@receiver(setting_changed)
def _forget_manager(*, setting: str, **kwargs: Any) -> None:
    if setting == "TULIP_MEMORY":
        build_memory_manager_from_settings.cache_clear()
