"""tulip_memory.langgraph without LangGraph installed, and on a database it cannot use."""

from __future__ import annotations

import importlib
import sys

import pytest

from tulip_memory.exceptions import ConfigurationError


def test_without_the_extra_the_error_names_it(monkeypatch):
    import tulip_memory.langgraph

    # As if langgraph-checkpoint were not installed (None in sys.modules blocks an import).
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.base", None)
    monkeypatch.delitem(sys.modules, "tulip_memory.langgraph.saver", raising=False)
    package = importlib.reload(tulip_memory.langgraph)  # importing it needs no LangGraph
    with pytest.raises(ImportError, match=r"pip install 'tulip-memory\[langgraph\]'"):
        package.DjangoSaver  # noqa: B018


def test_only_postgresql_is_accepted():
    from tulip_memory.langgraph import DjangoSaver

    with pytest.raises(ConfigurationError, match="needs a postgresql database"):
        DjangoSaver("mysql", tenant="acme")
    with pytest.raises(ConfigurationError, match="no database alias"):
        DjangoSaver("nowhere", tenant="acme")


def test_without_the_extra_the_store_error_names_it_too(monkeypatch):
    import tulip_memory.langgraph

    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    monkeypatch.delitem(sys.modules, "tulip_memory.langgraph.store", raising=False)
    package = importlib.reload(tulip_memory.langgraph)
    with pytest.raises(ImportError, match=r"DjangoStore needs .* 'tulip-memory\[langgraph\]'"):
        package.DjangoStore  # noqa: B018
