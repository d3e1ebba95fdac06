"""Check tulip_memory.E044: celery mode needs the project's Celery app, with a broker.

Real Celery app objects made current in turn: the project's (a broker set), Celery's
built-in default app (what ``current_app`` is when no project app was imported) and a
project app whose broker was never configured.
"""

from __future__ import annotations

import pytest
from celery import Celery, current_app

from tulip_memory.checks.manager import check_celery_app
from tulip_memory.manager import LLMMemoryManager
from tulip_memory.manager.extraction import modes
from tulip_memory.store import InMemoryStore


@pytest.fixture
def fresh_modes(monkeypatch):
    """This process as if no manager had been built yet."""
    monkeypatch.setattr(modes, "_modes_in_use", set())


@pytest.fixture
def current(request):
    """Make ``app`` Celery's current app for the test; the previous one afterwards."""
    previous = current_app._get_current_object()

    def make_current(app: Celery) -> Celery:
        app.set_current()
        return app

    yield make_current
    previous.set_current()


def _ids() -> list[str]:
    return [message.id for message in check_celery_app()]


def _celery_manager() -> LLMMemoryManager:
    return LLMMemoryManager(InMemoryStore(), extract_mode="celery")


def test_the_project_app_with_a_broker_passes(fresh_modes, current):
    current(Celery("project", broker="redis://127.0.0.1:6379/0"))
    _celery_manager()
    assert _ids() == []


def test_celerys_default_app_fails_in_celery_mode(fresh_modes, current):
    # What celery.current_app falls back to when no project app was imported.
    current(Celery("default", fixups=[], set_as_current=False, loader="default"))
    assert _ids() == []  # no manager in celery mode yet: nothing to say
    LLMMemoryManager(InMemoryStore(), extract_mode="background")
    assert _ids() == []
    _celery_manager()
    (error,) = check_celery_app()
    assert error.id == "tulip_memory.E044"
    assert "'default'" in error.msg and "no broker_url" in error.msg
    assert "the project's Celery app is not loaded" in error.msg
    assert "celery.py" in error.hint and "CELERY_BROKER_URL" in error.hint


def test_a_project_app_without_a_broker_fails(fresh_modes, current):
    current(Celery("project"))
    _celery_manager()
    (error,) = check_celery_app()
    assert error.id == "tulip_memory.E044"
    assert "('project') has no broker_url: that app was loaded but given no broker" in error.msg


def test_the_check_is_registered_and_the_test_projects_app_passes(fresh_modes, current):
    from django.core import checks

    def ids() -> set[str]:
        return {m.id for m in checks.run_checks(databases=[])}

    _celery_manager()
    # example_project's Celery app (imported with its package) reads CELERY_BROKER_URL.
    assert "tulip_memory.E044" not in ids()
    current(Celery("project"))
    assert "tulip_memory.E044" in ids()
