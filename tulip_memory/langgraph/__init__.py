"""LangGraph on tulip_memory: a checkpoint saver and a store whose rows live in this app's tables.

:class:`DjangoSaver` (in :mod:`tulip_memory.langgraph.saver`) is LangGraph's
``BaseCheckpointSaver`` over the ORM, tenant-isolated and delta-compressed;
:class:`DjangoStore` (in :mod:`tulip_memory.langgraph.store`) is LangGraph's ``BaseStore``
over PgMemory's table, tenant-isolated, ranked by PgMemory's hybrid search. They need the
``langgraph`` extra (``pip install 'tulip-memory[langgraph]'``); importing this package
does not import LangGraph, the first use of either class does (and names the extra
when it is missing).
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
