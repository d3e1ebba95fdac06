"""System checks of the ``TULIP_MEMORY`` settings dict itself (ids tulip_memory.E001, W001)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core import checks

__all__ = ["check_settings"]


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
