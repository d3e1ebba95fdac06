"""The one memory manager built from ``TULIP_MEMORY`` settings.

:func:`build_memory_manager_from_settings` is how an extraction worker (and the Celery
task that drives it) gets its :class:`~tulip_memory.manager.llm.LLMMemoryManager`:
``STORE`` (+ ``STORE_OPTIONS``), ``EXTRACTOR`` (``None``: the heuristic) and
``MANAGER_OPTIONS``, with ``extract_mode="inline"`` because the worker is where the job
runs. It is built once per process and rebuilt after ``TULIP_MEMORY`` changes.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from tulip_memory.manager.llm import LLMMemoryManager

__all__ = ["build_memory_manager_from_settings"]

_manager_cache: dict[str, LLMMemoryManager] = {}


def build_memory_manager_from_settings() -> LLMMemoryManager:
    """The manager this process runs extraction jobs with, built once from ``TULIP_MEMORY``."""
    manager = _manager_cache.get("manager")
    if manager is None:
        from tulip_memory.conf import settings

        store_factory = settings.import_setting("STORE")
        options: dict[str, Any] = dict(settings.MANAGER_OPTIONS)
        options["extract_mode"] = "inline"  # the worker is where the job runs
        manager = LLMMemoryManager(
            store_factory(**settings.STORE_OPTIONS),
            extract_fn=settings.import_setting("EXTRACTOR"),
            **options,
        )
        _manager_cache["manager"] = manager
    return manager


@receiver(setting_changed)
def _forget_manager(*, setting: str, **kwargs: Any) -> None:
    if setting == "TULIP_MEMORY":
        _manager_cache.clear()
