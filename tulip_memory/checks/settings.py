"""System checks of the ``TULIP_MEMORY`` settings dict itself (ids tulip_memory.E001, W001)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.core import checks

__all__ = ["check_settings", "needs_usable_settings"]

Check = TypeVar("Check", bound=Callable[..., list[Any]])


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


def needs_usable_settings(check: Check) -> Check:
    """``check``, skipped (no message) while ``TULIP_MEMORY`` is not a dict: E001 says so,
    and the check would otherwise fail with that ``TypeError`` instead of reporting."""
    from tulip_memory.conf import settings

    @functools.wraps(check)
    def checked(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[Any]:
        try:
            settings.unknown_keys()
        except TypeError:
            return []
        return check(app_configs, **kwargs)

    return checked  # type: ignore[return-value]
