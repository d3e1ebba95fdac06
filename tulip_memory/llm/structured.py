"""Structured output: a JSON object matching a schema, whatever the server supports.

``"auto"`` tries the JSON-schema response format, a forced tool call, then JSON in text,
and keeps the first mode that answers. A bad answer gets one repair request; a second
raises ``LLMError(kind="malformed_output")``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tulip_memory.exceptions import LLMError
from tulip_memory.llm.client import ChatClient, ChatResult
from tulip_memory.llm.usage import Usage

__all__ = ["StructuredOutput", "StructuredResult", "schema_problem"]

logger = logging.getLogger("tulip_memory.llm")

_FALLBACK = {"json_schema": "tools", "tools": "text"}
# Characters of a raw answer written to the debug log.
_RAW_LOG_CHARS = 500
# What the protocol allows as a response-format or function name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class StructuredResult:
    """A parsed answer, the usage of every call it took and the mode that produced it."""

    value: dict[str, Any]
    usage: Usage
    mode: str
    repaired: bool


def schema_problem(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """The first way ``value`` breaks ``schema`` (a JSON path and what is wrong), or ``None``.

    Covers the keywords the package's schemas use: ``type``, ``properties``, ``required``,
    ``additionalProperties: false``, ``items``, ``enum``, ``minimum``/``maximum``.
    """
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        kinds = tuple(kind for name in names for kind in _JSON_TYPES[name])
        is_bool = isinstance(value, bool)
        if not isinstance(value, kinds) or (is_bool and "boolean" not in names):
            return f"{path} must be {' or '.join(names)}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {schema['enum']}, got {value!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path} must be >= {schema['minimum']}, got {value!r}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path} must be <= {schema['maximum']}, got {value!r}"
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{path} lacks the field {name!r}"
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(properties))
            if extra:
                return f"{path} has unknown fields {extra}"
        for name, sub in properties.items():
            if name in value and (problem := schema_problem(value[name], sub, f"{path}.{name}")):
                return problem
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            if problem := schema_problem(item, schema["items"], f"{path}[{index}]"):
                return problem
    return None


def _parse(raw: str | None, schema: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The answer as a dict matching ``schema``, or ``None`` and what is wrong with it."""
    if raw is None or not raw.strip():
        return None, "the answer is empty"
    text = raw.strip()
    if fenced := _FENCE.match(text):
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"the answer is not valid JSON ({error.msg} at character {error.pos})"
    if problem := schema_problem(value, schema):
        return None, f"the JSON does not match the schema: {problem}"
    return value, ""


class StructuredOutput:
    """Asks a :class:`ChatClient` for JSON objects matching schemas (module docstring)."""

    def __init__(self, client: ChatClient) -> None:
        if not isinstance(client, ChatClient):
            raise ValueError(f"client must be a ChatClient, got {type(client).__name__}")
        self.client = client
        configured = client.config.structured_output
        self.mode: str = "json_schema" if configured == "auto" else configured
        self._fallback = configured == "auto"

    async def request(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        schema: dict[str, Any],
        name: str,
        max_tokens: int,
    ) -> StructuredResult:
        """A JSON object matching ``schema`` (named ``name``) for ``messages``."""
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise ValueError("schema must be a JSON schema dict of an object")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"name must be 1-64 letters, digits, '_' or '-', got {name!r}")
        usage = Usage()
        mode = self.mode
        while True:
            try:
                result = await self._ask(mode, messages, schema, name, max_tokens)
            except LLMError as error:
                if self._fallback and mode in _FALLBACK and error.status in (400, 422):
                    usage += Usage.of(error)  # the refused request
                    logger.info(
                        "the model server refused the %s structured output (HTTP %s); trying %s",
                        mode,
                        error.status,
                        _FALLBACK[mode],
                    )
                    mode = _FALLBACK[mode]
                    continue
                error.usage = usage + Usage.of(error)
                raise
            usage += result.usage
            break
        if mode != self.mode:
            # A lower mode answered what a higher one refused: the server lacks the feature.
            logger.info("structured output: using %s from now on, not %s", mode, self.mode)
            self.mode = mode
        raw = self._answer(result, name)
        value, problem = _parse(raw, schema)
        if value is not None:
            return StructuredResult(value, usage, mode, repaired=False)
        repair = [
            *messages,
            {"role": "assistant", "content": raw or ""},
            {
                "role": "user",
                # The schema again: a server that ignored the response format never showed it.
                "content": f"That answer cannot be used: {problem}. Reply again with only "
                "the corrected JSON object, nothing else, matching this JSON schema:\n"
                f"{json.dumps(schema, separators=(',', ':'))}",
            },
        ]
        try:
            retried = await self._ask(mode, repair, schema, name, max_tokens)
        except LLMError as error:
            error.usage = usage + Usage.of(error)
            raise
        usage += retried.usage
        repaired_raw = self._answer(retried, name)
        value, second_problem = _parse(repaired_raw, schema)
        if value is not None:
            logger.debug("structured output %s repaired after: %s", name, problem)
            return StructuredResult(value, usage, mode, repaired=True)
        logger.debug(
            "structured output %s unusable after one repair (%s); raw answer: %.*s",
            name,
            second_problem,
            _RAW_LOG_CHARS,
            repaired_raw,
        )
        raise LLMError(
            f"{name}: the model's answer is unusable after one repair: {second_problem}",
            kind="malformed_output",
            usage=usage,
            attempts=usage.calls,
        )

    async def _ask(
        self,
        mode: str,
        messages: Sequence[dict[str, Any]],
        schema: dict[str, Any],
        name: str,
        max_tokens: int,
    ) -> ChatResult:
        options: dict[str, Any] = {}
        if mode == "json_schema":
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            }
        elif mode == "tools":
            options["tools"] = [
                {"type": "function", "function": {"name": name, "parameters": schema}}
            ]
            options["tool_choice"] = {"type": "function", "function": {"name": name}}
        else:
            instruction = {
                "role": "system",
                "content": "Reply with one JSON object only (no prose, no code fence) matching "
                f"this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}",
            }
            messages = [*messages, instruction]
        return await self.client.complete(messages, max_tokens=max_tokens, purpose=name, **options)

    @staticmethod
    def _answer(result: ChatResult, name: str) -> str | None:
        for call in result.tool_calls:
            if call.name == name:
                return call.arguments
        return result.content
