"""System checks (``manage.py check``), registered from ``AppConfig.ready()``.

Ids: ``tulip_memory.E001`` and up for errors, ``tulip_memory.W001`` and up for warnings.
Each area adds its check functions to ``CHECKS`` below.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core import checks

from tulip_memory.manager.checks import check_manager_settings
from tulip_memory.registry import check_checkpointer_settings
from tulip_memory.rls import check_tenant_databases


def check_settings(
    app_configs: Iterable[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """tulip_memory.E001: TULIP_MEMORY is not a dict; W001: unknown keys (likely typos)."""
    from tulip_memory.conf import SETTINGS_NAME, settings

    try:
        unknown = settings.unknown_keys()
    except TypeError as exc:
        return [checks.Error(str(exc), id="tulip_memory.E001")]
    return [
        checks.Warning(
            f"settings.{SETTINGS_NAME} has an unknown key {key!r}",
            hint="See tulip_memory/conf.py for the documented settings.",
            id="tulip_memory.W001",
        )
        for key in unknown
    ]


CHECKS: list[tuple[Callable[..., list[checks.CheckMessage]], tuple[str, ...]]] = [
    (check_settings, ()),
    (check_tenant_databases, ("database",)),
    (check_checkpointer_settings, ()),
    (check_manager_settings, ()),
]


def register_all() -> None:
    for func, tags in CHECKS:
        checks.register(func, *tags)
