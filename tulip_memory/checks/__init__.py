"""System checks of tulip_memory, one module per concern, all registered in
:meth:`tulip_memory.apps.TulipMemoryConfig.ready` (ids listed in docs/operations.md).
"""

from django.core import checks

_LEVELS = {"E": checks.Error, "W": checks.Warning, "I": checks.Info}


def finding(id_: str, message: str, hint: str | None = None) -> checks.CheckMessage:
    """The message ``tulip_memory.<id_>``: an Error for ``E...``, a Warning for ``W...``,
    an Info for ``I...``."""
    return _LEVELS[id_[0]](message, hint=hint, id=f"tulip_memory.{id_}")
