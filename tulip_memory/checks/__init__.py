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


def registered(*tags: str, deploy: bool = False) -> Callable[[Check], Check]:
    """Register the decorated check with Django's, skipped while ``TULIP_MEMORY`` is not a
    dict (E001 says so); the check itself is returned unchanged."""
    from tulip_memory.conf import settings

    def register(check: Check) -> Check:
        @functools.wraps(check)
        def checked(app_configs: Iterable[Any] | None = None, **kwargs: Any) -> list[Any]:
            try:
                settings.unknown_keys()
            except TypeError:
                return []
            return check(app_configs, **kwargs)

        checks.register(checked, *tags, deploy=deploy)
        return check

    return register
