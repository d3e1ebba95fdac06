"""System check of the chat model's settings (ids tulip_memory.E050-E052).

It says what is missing before the first extraction fails at run time:

* E050 ``TULIP_MEMORY["LLM"]`` is malformed (unknown key, value out of range);
* E051 no ``MODEL`` is set;
* E052 ``BASE_URL`` is not local and the variable ``API_KEY_ENV`` names is unset or empty.

Only a project that sets a non-empty ``TULIP_MEMORY["LLM"]`` is checked: the others do not use a
chat model. Registered in AppConfig.ready() with the other checks.
"""

from __future__ import annotations

from typing import Any

from django.core import checks

__all__ = ["check_llm_settings"]


def check_llm_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The problems of ``TULIP_MEMORY["LLM"]``; empty when it is unset or usable."""
    from tulip_memory.conf import settings
    from tulip_memory.llm.config import LLMConfig

    if not settings.LLM:
        return []
    try:
        config = LLMConfig.from_dict(settings.LLM)
    except ValueError as exc:
        return [
            checks.Error(str(exc), hint="See docs/llm.md for the keys.", id="tulip_memory.E050")
        ]
    errors: list[checks.CheckMessage] = []
    if config.model is None:
        errors.append(
            checks.Error(
                "TULIP_MEMORY['LLM']['MODEL'] is not set",
                hint="Name the chat model the server serves, e.g. 'gpt-4o-mini' or 'llama3.1'.",
                id="tulip_memory.E051",
            )
        )
    if not config.is_local and config.api_key() is None:
        variable = config.api_key_env or "(API_KEY_ENV is None)"
        errors.append(
            checks.Error(
                f"no API key for {config.base_url}: the environment variable {variable} is "
                "unset or empty",
                hint="Set that variable in the process environment, or point BASE_URL at a "
                "local server.",
                id="tulip_memory.E052",
            )
        )
    return errors
