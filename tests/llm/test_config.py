"""TULIP_MEMORY["LLM"]: defaults, validation and the system check."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tulip_memory.checks.llm import check_llm_settings
from tulip_memory.llm.config import LLM_DEFAULTS, LLMConfig, is_local_url


def test_defaults_without_the_setting():
    config = LLMConfig.from_settings()
    assert config.base_url == LLM_DEFAULTS["BASE_URL"] and config.model is None
    assert config.api_key_env == "OPENAI_API_KEY" and config.structured_output == "auto"


def test_settings_are_read():
    options = {"BASE_URL": "http://localhost:11434/v1", "MODEL": "llama3.1", "MAX_RETRIES": 0}
    with override_settings(TULIP_MEMORY={"LLM": options}):
        config = LLMConfig.from_settings()
    assert (config.model, config.max_retries, config.is_local) == ("llama3.1", 0, True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"MODELL": "x"}, r"unknown keys \['MODELL'\]"),
        ({"BASE_URL": "ftp://x"}, r"\['BASE_URL'\] must be an http\(s\) URL"),
        ({"MODEL": " "}, r"\['MODEL'\] must be a model name"),
        ({"API_KEY_ENV": ""}, r"\['API_KEY_ENV'\] must name an environment variable"),
        ({"TIMEOUT": 0}, r"\['TIMEOUT'\] must be a number > 0"),
        ({"MAX_RETRIES": -1}, r"\['MAX_RETRIES'\] must be an int >= 0"),
        ({"MAX_CONCURRENCY": True}, r"\['MAX_CONCURRENCY'\] must be an int > 0"),
        ({"STRUCTURED_OUTPUT": "xml"}, r"\['STRUCTURED_OUTPUT'\] must be one of"),
        ({"MIN_CONFIDENCE": 2}, r"\['MIN_CONFIDENCE'\] must be a number in \[0, 1\]"),
        ({"REDACTION": []}, r"\['REDACTION'\] must be a dict"),
        ({"MAX_FACTS": 0}, r"\['MAX_FACTS'\] must be an int > 0"),
        ({"MAX_FACT_CHARS": 1.5}, r"\['MAX_FACT_CHARS'\] must be an int > 0"),
    ],
)
def test_bad_values_name_the_key(options, message):
    with pytest.raises(ValueError, match=message):
        LLMConfig.from_dict(options)


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8000/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://ollama:11434/v1", True),
        ("http://lmstudio.local:1234/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://acme.openai.azure.com/openai/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_is_local_url(url, local):
    assert is_local_url(url) is local


def test_check_is_silent_without_the_setting():
    assert check_llm_settings() == []


def test_check_says_what_is_missing(monkeypatch):
    monkeypatch.delenv("ACME_LLM_KEY", raising=False)
    options = {"BASE_URL": "https://llm.acme.com/v1", "API_KEY_ENV": "ACME_LLM_KEY"}
    with override_settings(TULIP_MEMORY={"LLM": options}):
        errors = check_llm_settings()
    assert [e.id for e in errors] == ["tulip_memory.E051", "tulip_memory.E052"]
    assert "ACME_LLM_KEY" in errors[1].msg
    monkeypatch.setenv("ACME_LLM_KEY", "sk-live-value")
    with override_settings(TULIP_MEMORY={"LLM": {**options, "MODEL": "gpt-4o-mini"}}):
        assert check_llm_settings() == []


def test_check_local_server_needs_no_key():
    options = {"BASE_URL": "http://localhost:11434/v1", "MODEL": "llama3.1", "API_KEY_ENV": None}
    with override_settings(TULIP_MEMORY={"LLM": options}):
        assert check_llm_settings() == []


def test_check_reports_malformed_settings():
    with override_settings(TULIP_MEMORY={"LLM": {"TIMEOUT": "slow"}}):
        (error,) = check_llm_settings()
    assert error.id == "tulip_memory.E050" and "TIMEOUT" in error.msg


@pytest.mark.django_db  # plain check also looks at the default database's RLS
def test_the_llm_check_is_registered_with_the_app():
    from django.core import checks
    from django.test import override_settings

    with override_settings(TULIP_MEMORY={"LLM": {"BASE_URL": "http://127.0.0.1:1/v1"}}):
        ids = {message.id for message in checks.run_checks()}
    assert "tulip_memory.E051" in ids
