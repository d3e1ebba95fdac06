"""System checks E040-E043 on the settings Celery workers build their manager from, and
what a worker refuses to start on (those, and the chat model's E050-E052)."""

from __future__ import annotations

import pytest

from tulip_memory.checks.manager import check_manager_settings


def _ids(settings, **overrides) -> list[str]:
    settings.TULIP_MEMORY = overrides
    return [message.id for message in check_manager_settings()]


def test_defaults_pass(settings):
    assert _ids(settings) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"STORE": "tulip_memory.store.NoSuchStore"}, "tulip_memory.E040"),
        ({"STORE_OPTIONS": []}, "tulip_memory.E040"),
        ({"STORE_OPTIONS": {"dimm": 256}}, "tulip_memory.E040"),
        ({"EXTRACTOR": "tests.manager.extractors.no_such_function"}, "tulip_memory.E041"),
        ({"EXTRACTOR": "tulip_memory.manager.heuristic.extract_heuristic"}, "tulip_memory.E041"),
        ({"MANAGER_OPTIONS": {"max_memorys": 3}}, "tulip_memory.E042"),
        ({"MANAGER_OPTIONS": {"extract_mode": "celery"}}, "tulip_memory.E042"),
        ({"MANAGER_OPTIONS": "max_memories=3"}, "tulip_memory.E042"),
        ({"CELERY_QUEUE": ""}, "tulip_memory.E043"),
        ({"EXTRACTION_LEASE_SECONDS": 0}, "tulip_memory.E043"),
        ({"EXTRACTION_RETRY_DELAY": -1}, "tulip_memory.E043"),
        ({"EXTRACTION_MAX_ATTEMPTS": 0}, "tulip_memory.E043"),
        ({"EXTRACTION_RESEND_AFTER": 0}, "tulip_memory.E043"),
        ({"EXTRACTION_RESEND_AFTER": "60"}, "tulip_memory.E043"),
        ({"EXTRACTION_RESEND_AFTER": float("inf")}, "tulip_memory.E043"),
        ({"EXTRACTION_LEASE_SECONDS": float("nan")}, "tulip_memory.E043"),
        ({"EXTRACTION_RETRY_DELAY": 1e300}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": 0}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": -5}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": None}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": "900"}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": float("inf")}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": float("nan")}, "tulip_memory.E043"),
        ({"EXTRACTION_JOB_TIMEOUT_SECONDS": True}, "tulip_memory.E043"),
    ],
)
def test_bad_settings_are_reported(settings, overrides, expected):
    assert _ids(settings, **overrides) == [expected]


def test_a_store_option_the_store_does_not_take_is_named(settings):
    settings.TULIP_MEMORY = {"STORE_OPTIONS": {"dimm": 256, "dim": 256}}
    [message] = check_manager_settings()
    assert "PgMemory does not take: ['dimm']" in message.msg and "'dim'" in message.hint


def test_a_valid_configuration_passes(settings):
    good = {
        "STORE_OPTIONS": {"dim": 512, "using": "default"},
        "EXTRACTOR": "tests.manager.extractors.logging_extractor",
        "MANAGER_OPTIONS": {"max_memories": 10, "retrieve_limit": 5},
        "EXTRACTION_JOB_TIMEOUT_SECONDS": 1.5,
    }
    assert _ids(settings, **good) == []


def test_the_job_timeout_has_a_default_of_15_minutes():
    from tulip_memory.conf import DEFAULTS

    assert DEFAULTS["EXTRACTION_JOB_TIMEOUT_SECONDS"] == 900.0


def test_what_a_worker_refuses_to_start_on(settings):
    from tulip_memory.checks.manager import worker_start_errors

    settings.TULIP_MEMORY = {}
    assert worker_start_errors() == []
    settings.TULIP_MEMORY = {"EXTRACTOR": "tests.manager.no_such_module.extract", "LLM": 3}
    # An EXTRACTOR: the worker never asks the chat model, so its checks do not apply.
    assert [error.id for error in worker_start_errors()] == ["tulip_memory.E041"]
    settings.TULIP_MEMORY = {"CELERY_QUEU": "typo"}  # a warning (W001): it starts
    assert worker_start_errors() == []
    settings.TULIP_MEMORY = ["not", "a", "dict"]
    assert [error.id for error in worker_start_errors()] == ["tulip_memory.E001"]
    settings.TULIP_MEMORY = {"EXTRACTION_JOB_TIMEOUT_SECONDS": 0}
    settings.SILENCED_SYSTEM_CHECKS = ["tulip_memory.E043"]
    assert worker_start_errors() == []


@pytest.mark.parametrize(
    ("llm", "expected"),
    [
        ({"MODEL": "test-model", "TIMEOUT": 0}, "tulip_memory.E050"),
        ({"BASE_URL": "http://localhost:11434/v1"}, "tulip_memory.E051"),
        ({"MODEL": "gpt-4o-mini", "API_KEY_ENV": "TULIP_TEST_NO_SUCH_KEY"}, "tulip_memory.E052"),
    ],
)
def test_a_worker_refuses_to_start_on_its_chat_models_errors(settings, monkeypatch, llm, expected):
    # Without EXTRACTOR the worker extracts with this model: every job's every attempt
    # would fail on it.
    from tulip_memory.checks.manager import worker_start_errors

    monkeypatch.delenv("TULIP_TEST_NO_SUCH_KEY", raising=False)
    settings.TULIP_MEMORY = {"LLM": llm}
    assert [error.id for error in worker_start_errors()] == [expected]
    settings.TULIP_MEMORY = {"LLM": llm, "EXTRACTOR": "tests.manager.extractors.logging_extractor"}
    assert worker_start_errors() == []
    settings.TULIP_MEMORY = {"LLM": llm}
    settings.SILENCED_SYSTEM_CHECKS = [expected]
    assert worker_start_errors() == []
