"""The chat-model client: OpenAI's chat-completions protocol through the ``openai`` library.

:class:`ChatClient` raises :class:`~tulip_memory.exceptions.LLMError` for every failure;
results and errors carry their :class:`~.usage.Usage`. Retries are the library's; this adds
what it lacks: ``TIMEOUT`` per attempt as a whole, a :mod:`.limiter` slot per attempt, and
delays from ``RETRY_BACKOFF``/``RETRY_BACKOFF_MAX`` (a longer ``Retry-After`` ends them).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import logging
import random
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tulip_memory.core.numbers import check_int
from tulip_memory.core.optional_dependencies import import_optional
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.budget import TokenEstimator
from tulip_memory.llm.config import LLMConfig
from tulip_memory.llm.limiter import ProcessLimiter, limiter_for
from tulip_memory.llm.usage import Usage

__all__ = [
    "ChatClient",
    "ChatResult",
    "LoopClients",
    "ToolCallRequest",
    "new_openai",
    "request_failure",
    "retry_after_seconds",
]

logger = logging.getLogger("tulip_memory.llm")

# The library refuses an empty key; a local server ignores this one.
NO_KEY = "not-needed"


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call in the model's answer: the function's name and its JSON arguments."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ChatResult:
    """The model's answer to one chat completion."""

    content: str | None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The delay a response asks for (``retry-after-ms`` or ``Retry-After``), if any."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            return max(0.0, float(headers[name]) / scale)
        except (KeyError, ValueError):
            pass
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    # "-0000" is UTC with no claim about the sender's zone, not this machine's zone.
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def request_failure(
    openai: Any, error: Any, server: str, base_url: str
) -> tuple[str, int | None, int, str]:
    """The error kind, HTTP status (``None`` without an answer), attempts and description
    of a request the library's retry loop gave up on; ``server`` names who answered."""
    # The library numbers its attempts in this header of each request it sends.
    attempts = int(error.request.headers.get("x-stainless-retry-count", 0)) + 1
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        kind = "rate_limited" if status == 429 else "server_error" if status >= 500 else "rejected"
        what = f"{server} answered HTTP {status} after {attempts} attempt(s): "
        return kind, status, attempts, what + _short(str(error.message))
    kind = "timeout" if isinstance(error, openai.APITimeoutError) else "connection"
    return kind, None, attempts, f"{kind} talking to {base_url} after {attempts} attempt(s)"


def new_openai(endpoint: Any, limiter: ProcessLimiter | None = None) -> Any:
    """An ``openai`` client with the policy of the module docstring, for ``endpoint``: an
    :class:`LLMConfig` or anything with its ``base_url``, ``timeout``, ``max_retries``,
    ``retry_backoff``, ``retry_backoff_max`` and ``api_key()``."""
    policy_openai, attempt_client = _openai_types()

    async def api_key() -> str:
        # Called by the library before each request: a rotated key is used at once.
        return endpoint.api_key() or NO_KEY

    return policy_openai(
        api_key=api_key,
        base_url=endpoint.base_url,
        timeout=endpoint.timeout,
        max_retries=endpoint.max_retries,
        backoff=endpoint.retry_backoff,
        backoff_max=endpoint.retry_backoff_max,
        http_client=attempt_client(limiter, endpoint.timeout),
    )


@functools.cache
def _openai_types() -> tuple[Any, Any]:
    # Defined once the library is imported.
    import openai

    class AttemptClient(openai.DefaultAsyncHttpxClient):
        """Each attempt in a limiter slot (if any) and bounded as a whole by ``timeout``
        (the library's bounds each read: a dripping answer would never time out)."""

        def __init__(self, limiter: ProcessLimiter | None, timeout: float) -> None:
            super().__init__(timeout=timeout)
            self._limiter = limiter
            self._attempt_timeout = timeout

        async def send(self, request: Any, **kwargs: Any) -> Any:
            try:
                slot = self._limiter.slot() if self._limiter else contextlib.nullcontext()
                async with slot, asyncio.timeout(self._attempt_timeout):
                    return await super().send(request, **kwargs)
            except TimeoutError:
                # The retry loop retries the timeouts of its HTTP library, httpx or httpx2
                # after openai's version: the one the request belongs to.
                http = sys.modules[type(request).__module__.partition(".")[0]]
                raise http.ReadTimeout("the attempt outlasted TIMEOUT", request=request) from None

    class PolicyOpenAI(openai.AsyncOpenAI):
        """The library's retry loop with delays from the config (its own are fixed)."""

        def __init__(self, *, backoff: float, backoff_max: float, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._backoff = backoff
            self._backoff_max = backoff_max

        def _should_retry(self, response: Any) -> bool:
            asked = retry_after_seconds(response.headers)
            if asked is not None and asked > self._backoff_max:
                return False  # asking sooner would only earn another 429
            return bool(super()._should_retry(response))

        def _calculate_retry_timeout(
            self, remaining_retries: int, options: Any, response_headers: Any = None
        ) -> float:
            asked = retry_after_seconds(response_headers)
            if asked is not None:
                return min(asked, self._backoff_max)
            retries_taken = options.get_max_retries(self.max_retries) - remaining_retries
            return random.uniform(0, min(self._backoff_max, self._backoff * 2**retries_taken))

    return PolicyOpenAI, AttemptClient


class LoopClients:
    """The ``openai`` clients of one owner, one per live event loop (the library's HTTP
    client belongs to its loop); thread-safe. A client is closed with its loop, or dropped
    at the next use if its loop closed without shutting down its async generators."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, AsyncGenerator[None, None]]] = {}

    def __len__(self) -> int:
        return len(self._clients)

    async def client(self) -> Any:
        """The running loop's client, made on first use."""
        loop = asyncio.get_running_loop()
        entry = await self._take(loop, pop=False)
        if entry is not None:
            return entry[0]
        client = self._factory()
        closer = _close_with_loop(client)
        with self._lock:
            self._clients[loop] = (client, closer)
        # Running it to its ``yield`` registers it with the loop, whose
        # ``shutdown_asyncgens()`` then resumes it to close the client.
        await closer.__anext__()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (and drop those of closed loops)."""
        entry = await self._take(asyncio.get_running_loop(), pop=True)
        if entry is not None:
            await entry[1].aclose()

    async def _take(self, loop: asyncio.AbstractEventLoop, *, pop: bool) -> Any:
        """The entry of ``loop`` (removed if ``pop``), once those of closed loops are closed."""
        with self._lock:
            entry = self._clients.pop(loop, None) if pop else self._clients.get(loop)
            abandoned = [self._clients.pop(old) for old in list(self._clients) if old.is_closed()]
        for client, _closer in abandoned:
            await _close(client)
        return entry


async def _close_with_loop(client: Any) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await _close(client)


async def _close(client: Any) -> None:
    # Best effort: the loop is ending, or closed (then its transports refuse, but the pool
    # is emptied and the garbage collector closes the sockets).
    if client.is_closed():
        return
    try:
        await client.close()
    except Exception:
        logger.debug("closing an HTTP client failed", exc_info=True)


class ChatClient:
    """Chat completions against the configured server (see the module docstring).

    Args:
        config: the endpoint and call policy; ``None`` reads ``TULIP_MEMORY["LLM"]``.
        estimator: token estimator shared with the budget cut; one per client by default,
            corrected by the usage the server reports.
    """

    def __init__(
        self, config: LLMConfig | None = None, *, estimator: TokenEstimator | None = None
    ) -> None:
        if config is not None and not isinstance(config, LLMConfig):
            raise ValueError(f"config must be an LLMConfig or None, got {type(config).__name__}")
        self.config = config if config is not None else LLMConfig.from_settings()
        self.estimator = estimator or TokenEstimator(self.config.chars_per_token)
        self.limiter = limiter_for(self.config.base_url, self.config.max_concurrency)
        self._clients = LoopClients(functools.partial(new_openai, self.config, self.limiter))

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.config.base_url!r}, model={self.config.model!r})"

    @property
    def model(self) -> str:
        if self.config.model is None:
            raise LLMError("TULIP_MEMORY['LLM']['MODEL'] is not set", kind="configuration")
        return self.config.model

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        await self._clients.aclose()

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: dict[str, Any] | str | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        """One chat completion of ``messages`` (chat-completions dicts), retried per the
        config; raises :class:`LLMError`. ``purpose`` names the call in the log line."""
        if isinstance(messages, (str, dict)) or not all(
            isinstance(m, dict) and "role" in m for m in messages
        ):
            raise ValueError("messages must be a list of chat-completions dicts with a 'role'")
        check_int(max_tokens, "max_tokens")
        openai = import_optional("openai", "llm", needed_by="tulip_memory.llm")
        model = self.model
        if not self.config.is_local and self.config.api_key() is None:
            raise LLMError(
                f"no API key for {self.config.base_url}: set the environment variable "
                f"{self.config.api_key_env}",
                kind="configuration",
            )
        request: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": self.config.temperature,
        }
        if response_format is not None:
            request["response_format"] = response_format
        if tools is not None:
            request["tools"] = tools
            if tool_choice is not None:
                request["tool_choice"] = tool_choice
        started = time.perf_counter()

        def failure(
            attempts: int, what: str, kind: str, status: int | None, spent: Usage | None = None
        ) -> LLMError:
            logger.debug(
                "llm call %s: model=%s failed (%s%s) after %d attempt(s) in %.0f ms",
                purpose,
                model,
                kind,
                "" if status is None else f", HTTP {status}",
                attempts,
                (time.perf_counter() - started) * 1000,
            )
            return LLMError(
                f"{purpose}: {what}",
                kind=kind,
                usage=(spent or Usage()) + Usage(failed_requests=attempts),
                attempts=attempts,
                status=status,
            )

        client = await self._clients.client()
        try:
            raw = await client.chat.completions.with_raw_response.create(**request)
        except (openai.APIStatusError, openai.APIConnectionError) as error:
            kind, status, attempts, what = request_failure(
                openai, error, "the model server", self.config.base_url
            )
            raise failure(attempts, what, kind, status) from error
        attempts = raw.retries_taken + 1
        not_a_completion = (
            f"the model server answered HTTP 200 after {attempts} attempt(s), "
            "but not with a chat completion"
        )
        try:
            completion = raw.parse()
        except json.JSONDecodeError as error:  # a body declared as JSON that is not
            what = f"{not_a_completion}: the body is not JSON"
            raise failure(attempts, what, "malformed_output", 200) from error
        if problem := _completion_problem(completion):
            kind, detail = problem
            what = f"{not_a_completion}: {detail}"
            raise failure(attempts, what, kind, 200, _reported(completion))
        prompt_chars = _prompt_chars(messages, (response_format, tools))
        result = self._result(completion, prompt_chars, failed_requests=attempts - 1)
        logger.debug(
            "llm call %s: model=%s attempts=%d finish=%s prompt_tokens=%d "
            "completion_tokens=%d%s in %.0f ms",
            purpose,
            model,
            attempts,
            result.finish_reason,
            result.usage.prompt_tokens,
            result.usage.completion_tokens,
            " (estimated)" if result.usage.estimated else "",
            (time.perf_counter() - started) * 1000,
        )
        return result

    def _result(self, completion: Any, prompt_chars: int, *, failed_requests: int) -> ChatResult:
        choice = completion.choices[0]
        message = choice.message
        content = message.content
        calls = [
            ToolCallRequest(call.function.name, call.function.arguments or "")
            for call in message.tool_calls or []
            if getattr(call, "function", None) is not None
        ]
        reported = completion.usage
        estimated = reported is None or not reported.prompt_tokens
        if estimated:
            answer = (content or "") + "".join(c.arguments for c in calls)
            tokens = self.estimator.tokens_for_chars(prompt_chars), self.estimator.tokens(answer)
        else:
            self.estimator.observe(prompt_chars, reported.prompt_tokens)
            tokens = reported.prompt_tokens, reported.completion_tokens or 0
        usage = Usage(*tokens, 1, estimated=estimated, failed_requests=failed_requests)
        return ChatResult(content, calls, choice.finish_reason, usage)


def _prompt_chars(messages: Sequence[dict[str, Any]], extra: Sequence[Any]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages) + sum(
        len(json.dumps(item)) for item in extra if item is not None
    )


def _completion_problem(completion: Any) -> tuple[str, str] | None:
    """Why a 200 answer is not a chat completion (error kind, what is wrong), or ``None``."""
    if isinstance(completion, str) or not hasattr(completion, "choices"):
        return "malformed_output", "the body is not a JSON object"
    choices = completion.choices
    if isinstance(choices, list) and choices and getattr(choices[0], "message", None) is not None:
        return None
    error = getattr(completion, "error", None)
    if error is not None:
        message = error.get("message", error) if isinstance(error, dict) else error
        return "server_error", f"the body is an error: {_short(str(message))}"
    return "malformed_output", "the body has no choices with a message"


def _reported(completion: Any) -> Usage:
    """The tokens an answer that is not a chat completion reports spent, if any."""
    reported = getattr(completion, "usage", None)
    prompt, answer = (
        getattr(reported, name, None) for name in ("prompt_tokens", "completion_tokens")
    )
    return Usage(prompt if isinstance(prompt, int) else 0, answer if isinstance(answer, int) else 0)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
