"""The chat model's settings: ``TULIP_MEMORY["LLM"]`` read into one :class:`LLMConfig`.

Every key is optional; :data:`LLM_DEFAULTS` fills the rest. The API key itself is never a
setting: ``API_KEY_ENV`` names the environment variable it is read from at each request,
so it is neither kept on these objects nor written to a log.

Pure Python: without configured Django settings :meth:`LLMConfig.from_settings` returns
the defaults.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, fields
from typing import Any, Literal
from urllib.parse import urlsplit

__all__ = ["LLM_DEFAULTS", "STRUCTURED_MODES", "LLMConfig", "StructuredMode", "is_local_url"]

StructuredMode = Literal["auto", "json_schema", "tools", "text"]
STRUCTURED_MODES: tuple[str, ...] = ("auto", "json_schema", "tools", "text")

LLM_DEFAULTS: dict[str, Any] = {
    # Any OpenAI-compatible server: OpenAI, Azure OpenAI (its /openai/v1 URL), Ollama
    # (http://localhost:11434/v1), vLLM, llama.cpp, LM Studio.
    "BASE_URL": "https://api.openai.com/v1",
    "MODEL": None,
    # Name of the environment variable holding the key; a local server needs none.
    "API_KEY_ENV": "OPENAI_API_KEY",
    # Seconds per HTTP request.
    "TIMEOUT": 60.0,
    # Retries after the first attempt, on timeouts, connection errors, 429 and 5xx.
    "MAX_RETRIES": 3,
    # First retry delay in seconds, doubled per retry (full jitter), capped at the max;
    # a 429's Retry-After is honoured instead when the server sends one.
    "RETRY_BACKOFF": 0.5,
    "RETRY_BACKOFF_MAX": 30.0,
    # Requests in flight at once to one BASE_URL from this process (all event loops).
    "MAX_CONCURRENCY": 4,
    # "auto": JSON-schema response format, else tool calling, else JSON in text.
    "STRUCTURED_OUTPUT": "auto",
    "TEMPERATURE": 0.0,
    # Prompt tokens a run may take; older messages are cut first (tulip_memory.llm.budget).
    "INPUT_TOKEN_BUDGET": 6000,
    # Characters per token until the server reports usage.
    "CHARS_PER_TOKEN": 4.0,
    "EXTRACTION_MAX_TOKENS": 1500,
    "SUMMARY_MAX_TOKENS": 400,
    # Existing memories shown to the model per candidate fact.
    "RELATED_MEMORIES": 5,
    # Candidates below this confidence are dropped before consolidation.
    "MIN_CONFIDENCE": 0.5,
    # Facts one extraction answer may add (the rest are refused) and characters per fact
    # (a longer one is refused): bounds on what one model answer can write.
    "MAX_FACTS": 30,
    "MAX_FACT_CHARS": 1000,
    # tulip_memory.llm.redaction.RedactionPolicy options (DETECTORS, EXTRA_PATTERNS, ALLOW,
    # REPLACEMENT).
    "REDACTION": {},
}


def _positive(name: str, value: Any, *, integer: bool = False, zero: bool = False) -> None:
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    valid = isinstance(value, kinds) and not isinstance(value, bool)
    if not valid or value < 0 or (value == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        kind = "an int" if integer else "a number"
        raise ValueError(f"TULIP_MEMORY['LLM']['{name}'] must be {kind} {bound}, got {value!r}")


@dataclass(frozen=True)
class LLMConfig:
    """The chat model endpoint and how calls to it behave (see :data:`LLM_DEFAULTS`)."""

    base_url: str = LLM_DEFAULTS["BASE_URL"]
    model: str | None = LLM_DEFAULTS["MODEL"]
    api_key_env: str | None = LLM_DEFAULTS["API_KEY_ENV"]
    timeout: float = LLM_DEFAULTS["TIMEOUT"]
    max_retries: int = LLM_DEFAULTS["MAX_RETRIES"]
    retry_backoff: float = LLM_DEFAULTS["RETRY_BACKOFF"]
    retry_backoff_max: float = LLM_DEFAULTS["RETRY_BACKOFF_MAX"]
    max_concurrency: int = LLM_DEFAULTS["MAX_CONCURRENCY"]
    structured_output: StructuredMode = LLM_DEFAULTS["STRUCTURED_OUTPUT"]
    temperature: float = LLM_DEFAULTS["TEMPERATURE"]
    input_token_budget: int = LLM_DEFAULTS["INPUT_TOKEN_BUDGET"]
    chars_per_token: float = LLM_DEFAULTS["CHARS_PER_TOKEN"]
    extraction_max_tokens: int = LLM_DEFAULTS["EXTRACTION_MAX_TOKENS"]
    summary_max_tokens: int = LLM_DEFAULTS["SUMMARY_MAX_TOKENS"]
    related_memories: int = LLM_DEFAULTS["RELATED_MEMORIES"]
    min_confidence: float = LLM_DEFAULTS["MIN_CONFIDENCE"]
    max_facts: int = LLM_DEFAULTS["MAX_FACTS"]
    max_fact_chars: int = LLM_DEFAULTS["MAX_FACT_CHARS"]
    redaction: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or urlsplit(self.base_url).scheme not in (
            "http",
            "https",
        ):
            raise ValueError(
                f"TULIP_MEMORY['LLM']['BASE_URL'] must be an http(s) URL, got {self.base_url!r}"
            )
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ValueError(
                f"TULIP_MEMORY['LLM']['MODEL'] must be a model name, got {self.model!r}"
            )
        if self.api_key_env is not None and (
            not isinstance(self.api_key_env, str) or not self.api_key_env.strip()
        ):
            raise ValueError(
                "TULIP_MEMORY['LLM']['API_KEY_ENV'] must name an environment variable or be "
                f"None, got {self.api_key_env!r}"
            )
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
        names = {f.name.upper(): f.name for f in fields(cls)}
        return cls(**{names[key]: value for key, value in {**LLM_DEFAULTS, **options}.items()})

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
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env) or None


def is_local_url(url: str) -> bool:
    """Whether ``url`` points at this machine or a private network (needs no API key).

    Loopback, private and link-local addresses, ``localhost``, ``*.local`` and single-label
    host names (a container's service name, e.g. ``http://ollama:11434``) count as local.
    """
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
