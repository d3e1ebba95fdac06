"""System check of ``TULIP_MEMORY["LLM"]`` (E050-E052): well formed, a ``MODEL``, an API key
for a remote ``BASE_URL``.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

from tulip_memory.checks import finding, registered

__all__ = ["check_llm_settings"]


@registered()
def check_llm_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The problems of ``TULIP_MEMORY["LLM"]``; empty when it is unset or usable."""
    from tulip_memory.conf import settings
    from tulip_memory.llm.config import LLMConfig

    if not settings.LLM:
        return []
    try:
        config = LLMConfig.from_dict(settings.LLM)
    except ValueError as exc:
        return [finding("E050", str(exc), "See docs/llm.md for the keys.")]
    errors: list[checks.CheckMessage] = []
    if config.model is None:
        errors.append(
            finding(
                "E051",
                "TULIP_MEMORY['LLM']['MODEL'] is not set",
                "Name the chat model the server serves, e.g. 'gpt-4o-mini' or 'llama3.1'.",
            )
        )
    if not config.is_local and config.api_key() is None:
        variable = config.api_key_env or "(API_KEY_ENV is None)"
        errors.append(
            finding(
                "E052",
                f"no API key for {config.base_url}: the environment variable {variable} is "
                "unset or empty",
                "Set that variable in the process environment, or point BASE_URL at a "
                "local server.",
            )
        )
    return errors
