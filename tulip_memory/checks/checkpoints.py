"""System check E030: the checkpointer providers of ``TULIP_MEMORY["CHECKPOINTERS"]``."""

from __future__ import annotations

from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered
from tulip_memory.registry import configured_providers

__all__ = ["check_checkpointer_settings"]


@registered()
def check_checkpointer_settings(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """tulip_memory.E030: ``TULIP_MEMORY["CHECKPOINTERS"]`` is unusable.

    It must be a dict of provider name (non-empty, no ``:``) -> importable callable.
    """
    try:
        factories = configured_providers()
    except (ValueError, ImportError) as exc:
        return [
            finding(
                "E030",
                f'TULIP_MEMORY["CHECKPOINTERS"] is unusable: {exc}',
                'Use {"name": "dotted.path.to.factory"}; see docs/checkpointers.md.',
            )
        ]
    return [
        finding(
            "E030",
            f'TULIP_MEMORY["CHECKPOINTERS"][{name!r}] is not callable',
            "Point it at a factory (a class or function) that returns a checkpointer.",
        )
        for name, factory in factories.items()
        if not callable(factory)
    ]
