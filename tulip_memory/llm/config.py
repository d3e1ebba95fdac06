"""The chat model's settings: ``TULIP_MEMORY["LLM"]`` checked into one :class:`LLMConfig`.

Every key is optional (docs/llm.md). The API key is never a setting: ``API_KEY_ENV`` names
the environment variable read at each request.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from tulip_memory.core.numbers import check_number

__all__ = [
    "LLM_DEFAULTS",
    "STRUCTURED_MODES",
    "LLMConfig",
    "StructuredMode",
    "check_endpoint",
    "env_api_key",
    "is_local_url",
]

StructuredMode = Literal["auto", "json_schema", "tools", "text"]
STRUCTURED_MODES: tuple[str, ...] = get_args(StructuredMode)


def _setting(key: str) -> str:
    return f"TULIP_MEMORY['LLM']['{key.upper()}']"


def _positive(name: str, value: Any, *, integer: bool = False, zero: bool = False) -> None:
    check_number(value, _setting(name), integer=integer, strict=not zero)


def check_endpoint(base_url: object, api_key_env: object, named: Callable[[str], str]) -> None:
    """ValueError, naming the argument by ``named``, unless ``base_url`` is an http(s) URL
    and ``api_key_env`` names an environment variable or is None."""
    if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https"):
        raise ValueError(f"{named('base_url')} must be an http(s) URL, got {base_url!r}")
    if api_key_env is not None and (not isinstance(api_key_env, str) or not api_key_env.strip()):
        raise ValueError(
            f"{named('api_key_env')} must name an environment variable or be None, "
            f"got {api_key_env!r}"
        )


@dataclass(frozen=True)
class LLMConfig:
    """The chat model endpoint and how calls to it behave; one field per upper-case key."""

    base_url: str = "https://api.openai.com/v1"
    model: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    retry_backoff_max: float = 30.0
    max_concurrency: int = 4
    structured_output: StructuredMode = "auto"
    temperature: float = 0.0
    input_token_budget: int = 6000
    chars_per_token: float = 4.0
    extraction_max_tokens: int = 1500
    summary_max_tokens: int = 400
    related_memories: int = 5
    min_confidence: float = 0.5
    max_facts: int = 30
    max_fact_chars: int = 1000
    redaction: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_endpoint(self.base_url, self.api_key_env, _setting)
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ValueError(f"{_setting('model')} must be a model name, got {self.model!r}")
        _positive("TIMEOUT", self.timeout)
        _positive("MAX_RETRIES", self.max_retries, integer=True, zero=True)
        _positive("RETRY_BACKOFF", self.retry_backoff, zero=True)
        _positive("RETRY_BACKOFF_MAX", self.retry_backoff_max, zero=True)
        _positive("MAX_CONCURRENCY", self.max_concurrency, integer=True)
        if self.structured_output not in STRUCTURED_MODES:
            raise ValueError(
                "TULIP_MEMORY['LLM']['STRUCTURED_OUTPUT'] must be one of "
                f"{list(STRUCTURED_MODES)}, got {self.structured_output!r}"
            )
        _positive("TEMPERATURE", self.temperature, zero=True)
        _positive("INPUT_TOKEN_BUDGET", self.input_token_budget, integer=True)
        _positive("CHARS_PER_TOKEN", self.chars_per_token)
        _positive("EXTRACTION_MAX_TOKENS", self.extraction_max_tokens, integer=True)
        _positive("SUMMARY_MAX_TOKENS", self.summary_max_tokens, integer=True)
        _positive("RELATED_MEMORIES", self.related_memories, integer=True, zero=True)
        _positive("MAX_FACTS", self.max_facts, integer=True)
        _positive("MAX_FACT_CHARS", self.max_fact_chars, integer=True)
        if not isinstance(self.min_confidence, (int, float)) or not 0 <= self.min_confidence <= 1:
            raise ValueError(
                "TULIP_MEMORY['LLM']['MIN_CONFIDENCE'] must be a number in [0, 1], "
                f"got {self.min_confidence!r}"
            )
        if not isinstance(self.redaction, dict):
            raise ValueError(
                "TULIP_MEMORY['LLM']['REDACTION'] must be a dict, "
                f"got {type(self.redaction).__name__}"
            )

    @classmethod
    def from_dict(cls, options: dict[str, Any]) -> LLMConfig:
        """A config from a ``TULIP_MEMORY["LLM"]``-shaped dict (upper-case keys)."""
        if not isinstance(options, dict):
            raise ValueError(f"TULIP_MEMORY['LLM'] must be a dict, got {type(options).__name__}")
        unknown = sorted(set(options) - set(LLM_DEFAULTS))
        if unknown:
            raise ValueError(
                f"TULIP_MEMORY['LLM'] has unknown keys {unknown}; known: {sorted(LLM_DEFAULTS)}"
            )
        return cls(**{key.lower(): value for key, value in options.items()})

    @classmethod
    def from_settings(cls) -> LLMConfig:
        """The config ``TULIP_MEMORY["LLM"]`` describes (the defaults without settings)."""
        from tulip_memory.conf import settings

        return cls.from_dict(settings.LLM or {})

    @property
    def is_local(self) -> bool:
        return is_local_url(self.base_url)

    def api_key(self) -> str | None:
        """The key from the environment, read now (``None`` when unset or not configured)."""
        return env_api_key(self.api_key_env)


def env_api_key(name: str | None) -> str | None:
    """The environment variable ``name`` (``None`` when unset, empty or not named)."""
    return None if name is None else os.environ.get(name) or None


def is_local_url(url: str) -> bool:
    """Whether ``url`` is loopback, private or link-local, ``localhost``, ``*.local`` or a
    single-label host (a container's service name): a server that needs no API key."""
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return False
    single_label = "." not in host and ":" not in host
    if single_label or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


#: Every ``TULIP_MEMORY["LLM"]`` key and its default.
LLM_DEFAULTS: dict[str, Any] = {
    f.name.upper(): {} if f.default is MISSING else f.default for f in fields(LLMConfig)
}
