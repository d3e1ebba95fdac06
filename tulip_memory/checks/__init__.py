"""System checks of tulip_memory, one module per concern (ids listed in docs/operations.md);
a check registers itself (:func:`registered`) as ``TulipMemoryConfig.ready`` imports it.
"""

import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.core import checks

Check = TypeVar("Check", bound=Callable[..., list[Any]])

_LEVELS = {"E": checks.Error, "W": checks.Warning, "I": checks.Info}


def finding(id_: str, message: str, hint: str | None = None) -> checks.CheckMessage:
    """The message ``tulip_memory.<id_>``: an Error for ``E...``, a Warning for ``W...``,
    an Info for ``I...``."""
    return _LEVELS[id_[0]](message, hint=hint, id=f"tulip_memory.{id_}")


@functools.cache
def needs_usable_settings(check: Check) -> Check:
    """``check``, skipped while ``TULIP_MEMORY`` is not a dict (E001 says so); one wrapper
    per check, so that registering it again keeps it once in Django's registry."""
    from tulip_memory.conf import settings

    @functools.wraps(check)
    def checked(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[Any]:
        try:
            settings.unknown_keys()
        except TypeError:
            return []
        return check(app_configs, **kwargs)

    return checked  # type: ignore[return-value]


def registered(*tags: str, deploy: bool = False) -> Callable[[Check], Check]:
    """Register the decorated check with Django's, as :func:`needs_usable_settings` of it."""

    def register(check: Check) -> Check:
        checks.register(needs_usable_settings(check), *tags, deploy=deploy)
        return check

    return register
