"""LangGraph on tulip_memory: :class:`DjangoSaver` (checkpoints) and :class:`DjangoStore`
(long-term store), tenant-isolated, in this app's tables. They need the ``langgraph``
extra; importing this package does not import LangGraph.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DjangoSaver", "DjangoStore"]


def __getattr__(name: str) -> Any:
    if name == "DjangoSaver":
        from tulip_memory.core.optional_dependencies import import_optional

        import_optional("langgraph.checkpoint.base", "langgraph", "DjangoSaver")
        from tulip_memory.langgraph.saver import DjangoSaver

        return DjangoSaver
    if name == "DjangoStore":
        from tulip_memory.core.optional_dependencies import import_optional

        import_optional("langgraph.store.base", "langgraph", "DjangoStore")
        from tulip_memory.langgraph.store import DjangoStore

        return DjangoStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
