"""The chat-model client: OpenAI's chat-completions protocol through the ``openai`` library.

One :class:`ChatClient` reaches any OpenAI-compatible server (OpenAI, Azure OpenAI,
Ollama, vLLM, llama.cpp, LM Studio) from ``TULIP_MEMORY["LLM"]`` (:class:`LLMConfig`).
Around each request it adds what the library's own retry loop does not give:

* a ``TIMEOUT`` on each attempt as a whole (sending the request and reading the whole
  answer), not only on each network read;
* retries on timeouts, connection errors, 429 and 5xx with exponential backoff and full
  jitter; a 429's ``Retry-After`` (or ``retry-after-ms``) is honoured when it is within
  ``RETRY_BACKOFF_MAX``, and ends the retries when it is longer (asking sooner would only
  earn another 429);
* a per-process cap on requests in flight to one ``BASE_URL`` (:mod:`.limiter`);
* the usage of every call (:class:`~.usage.Usage`, estimated from characters when the
  server reports none; the requests that got no answer counted too, on the result or on
  the error) and one debug log line per call, without content or key;
* one exception type, :class:`~tulip_memory.exceptions.LLMError`, for every failure. A
  200 answer that is not a chat completion is one too, not retried: ``kind="server_error"``
  when its body is an error object (``{"error": ...}``), ``"malformed_output"`` when it is
  not JSON (a gateway's HTML page), not an object, or has no ``choices``; tokens it
  reports are counted on the error's usage.

The API key is read from the environment at each request, never from settings. The
HTTP clients, one per event loop, are closed with their loop (:class:`LoopClients`). ``openai``
is imported when the first request is made; it is the ``llm`` extra.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tulip_memory.core.numbers import check_int
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.budget import TokenEstimator
from tulip_memory.llm.config import LLMConfig
from tulip_memory.llm.limiter import limiter_for
from tulip_memory.llm.usage import Usage

__all__ = [
    "ChatClient",
    "ChatResult",
    "LoopClients",
    "ToolCallRequest",
    "backoff_delay",
    "retry_after_seconds",
]

logger = logging.getLogger("tulip_memory.llm")

# The key sent to a local server that wants none (the library refuses an empty one).
_NO_KEY = "not-needed"


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


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(
            "tulip_memory.llm needs the openai package: pip install 'tulip-memory[llm]'"
        ) from exc
    return openai


def _prompt_chars(messages: Sequence[dict[str, Any]], extra: Sequence[Any]) -> int:
    return sum(len(str(m.get("content") or "")) for m in messages) + sum(
        len(json.dumps(item)) for item in extra if item is not None
    )


def retry_after_seconds(headers: Any) -> float | None:
    """The delay a 429 or 503 asks for (``retry-after-ms`` or ``Retry-After``), if any."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # a "-0000" zone: UTC, with no claim about the local zone
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(
    attempts: int, headers: Any, *, max_retries: int, backoff: float, backoff_max: float
) -> float | None:
    """Seconds to wait after failed attempt number ``attempts``, or ``None`` to give up.

    Exponential backoff with full jitter (``backoff * 2**(attempts-1)``, capped at
    ``backoff_max``); a ``Retry-After`` in ``headers`` is honoured instead when it is
    within ``backoff_max``, and ends the retries when it is longer. Shared by the chat
    client and :class:`~tulip_memory.embeddings.OpenAIEmbedding`.
    """
    if attempts > max_retries:
        return None
    asked = retry_after_seconds(headers)
    if asked is not None:
        return asked if asked <= backoff_max else None
    return random.uniform(0, min(backoff_max, backoff * 2 ** (attempts - 1)))


class LoopClients:
    """The ``openai`` clients of one owner, one per event loop, never more than live loops.

    The library's HTTP client belongs to the loop it first ran on, and its keep-alive
    connections hold that loop. ``async_to_sync`` (the sync facades, the Celery workers,
    the admin) and ``asyncio.run`` per request make a new loop per call, so a cache keyed
    by loop alone would keep one client, one socket and one closed loop per call. Here:

    * each client is closed on its own loop when the loop shuts down its async generators
      (``asyncio.run``, ``asyncio.Runner`` and ``async_to_sync`` do before closing it);
    * every use drops the clients of loops closed without that step, closing what can
      still be closed (their sockets otherwise go with the garbage collector);
    * :meth:`aclose` closes the running loop's client at once.

    Creating a client per call instead would cost ~20 ms (the TLS context) and a new
    connection per call. Shared by :class:`ChatClient` and
    :class:`~tulip_memory.embeddings.OpenAIEmbedding`; thread-safe.
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Any, AsyncGenerator[None, None]]] = {}

    def __len__(self) -> int:
        """The clients held (one per loop that used one and is not known closed)."""
        return len(self._clients)

    async def client(self) -> Any:
        """The running loop's client, made on first use."""
        loop = asyncio.get_running_loop()
        with self._lock:
            abandoned = [self._clients.pop(old) for old in list(self._clients) if old.is_closed()]
            entry = self._clients.get(loop)
        for client, _closer in abandoned:
            await _close_abandoned(client)
        if entry is not None:
            return entry[0]
        client = self._factory()
        closer = _close_with_loop(client)
        with self._lock:
            self._clients[loop] = (client, closer)
        # Runs to its ``yield`` at once, which registers it with the loop (its first-iteration
        # hook): the loop's ``shutdown_asyncgens()`` then resumes it, and it closes the client.
        await closer.__anext__()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (and drop those of closed loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.pop(loop, None)
            abandoned = [self._clients.pop(old) for old in list(self._clients) if old.is_closed()]
        for client, _closer in abandoned:
            await _close_abandoned(client)
        if entry is not None:
            await entry[1].aclose()


async def _close_with_loop(client: Any) -> AsyncGenerator[None, None]:
    """Wait (suspended at ``yield``) for the loop's end or :meth:`LoopClients.aclose`, then
    close ``client`` on its loop."""
    try:
        yield
    finally:
        try:
            await client.close()
        except Exception:  # closing is best effort: the loop is ending anyway
            logger.debug("closing an HTTP client failed", exc_info=True)


async def _close_abandoned(client: Any) -> None:
    """Close a client whose loop was closed without shutting down its async generators.

    Its connections belong to the closed loop, whose transports refuse to close
    (``RuntimeError: Event loop is closed``); the pool is emptied all the same, and the
    sockets are closed when the garbage collector frees the transports.
    """
    if client.is_closed():
        return
    try:
        await client.close()
    except Exception:
        logger.debug("closing the HTTP client of a closed event loop failed", exc_info=True)


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
        # The library's HTTP client belongs to one event loop: one per live loop.
        self._clients = LoopClients(self._new_openai)

    def __repr__(self) -> str:
        return f"ChatClient(base_url={self.config.base_url!r}, model={self.config.model!r})"

    @property
    def model(self) -> str:
        if self.config.model is None:
            raise LLMError("TULIP_MEMORY['LLM']['MODEL'] is not set", kind="configuration")
        return self.config.model

    def _new_openai(self) -> Any:
        return _import_openai().AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.config.base_url,
            timeout=self.config.timeout,
            max_retries=0,  # retried here: jitter, Retry-After bound, one limiter slot each
        )

    async def _api_key(self) -> str:
        return self.config.api_key() or _NO_KEY

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
        """One chat completion, retried per the config; raises :class:`LLMError`.

        ``messages`` are chat-completions dicts (``{"role": ..., "content": ...}``).
        ``purpose`` names the call in the log line.
        """
        if isinstance(messages, (str, dict)) or not all(
            isinstance(m, dict) and "role" in m for m in messages
        ):
            raise ValueError("messages must be a list of chat-completions dicts with a 'role'")
        check_int(max_tokens, "max_tokens")
        openai = _import_openai()
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
        prompt_chars = _prompt_chars(messages, (response_format, tools))
        started = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            try:
                completion = await self._attempt(request)
            except openai.APIStatusError as error:
                status = error.status_code
                retryable = status == 429 or status >= 500
                kind = (
                    "rate_limited"
                    if status == 429
                    else "server_error"
                    if status >= 500
                    else "rejected"
                )
                delay = self._delay(
                    attempts, error.response.headers if status in (429, 503) else None
                )
                if not retryable or delay is None:
                    self._log_failure(purpose, model, attempts, started, f"HTTP {status}")
                    raise LLMError(
                        f"{purpose}: the model server answered HTTP {status} "
                        f"after {attempts} attempt(s): {_short(error.message)}",
                        kind=kind,
                        usage=Usage(failed_requests=attempts),
                        attempts=attempts,
                        status=status,
                    ) from error
            except json.JSONDecodeError as error:  # a body declared as JSON that is not
                raise self._not_a_completion(
                    purpose,
                    model,
                    attempts,
                    started,
                    kind="malformed_output",
                    what="the body is not JSON",
                ) from error
            except (openai.APIConnectionError, TimeoutError) as error:
                timed_out = isinstance(error, (openai.APITimeoutError, TimeoutError))
                kind = "timeout" if timed_out else "connection"
                delay = self._delay(attempts, None)
                if delay is None:
                    self._log_failure(purpose, model, attempts, started, kind)
                    raise LLMError(
                        f"{purpose}: {kind} talking to {self.config.base_url} "
                        f"after {attempts} attempt(s)",
                        kind=kind,
                        usage=Usage(failed_requests=attempts),
                        attempts=attempts,
                    ) from error
            else:
                if problem := _completion_problem(completion):
                    kind, what = problem
                    raise self._not_a_completion(
                        purpose,
                        model,
                        attempts,
                        started,
                        kind=kind,
                        what=what,
                        reported=_reported(completion),
                    )
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
            logger.debug(
                "llm call %s: attempt %d failed, retrying in %.2f s", purpose, attempts, delay
            )
            await asyncio.sleep(delay)

    async def _attempt(self, request: dict[str, Any]) -> Any:
        """One request in a limiter slot, bounded as a whole by ``TIMEOUT``: the library's
        timeout bounds each network read only, so a server dripping its answer would never
        time out (raises ``TimeoutError`` then)."""
        client = await self._clients.client()
        async with self.limiter.slot(), asyncio.timeout(self.config.timeout):
            return await client.chat.completions.create(**request)

    def _delay(self, attempts: int, headers: Any) -> float | None:
        """Seconds before the next attempt, or ``None`` when there is none."""
        return backoff_delay(
            attempts,
            headers,
            max_retries=self.config.max_retries,
            backoff=self.config.retry_backoff,
            backoff_max=self.config.retry_backoff_max,
        )

    def _log_failure(
        self, purpose: str, model: str, attempts: int, started: float, reason: str
    ) -> None:
        logger.debug(
            "llm call %s: model=%s failed (%s) after %d attempt(s) in %.0f ms",
            purpose,
            model,
            reason,
            attempts,
            (time.perf_counter() - started) * 1000,
        )

    def _not_a_completion(
        self,
        purpose: str,
        model: str,
        attempts: int,
        started: float,
        *,
        kind: str,
        what: str,
        reported: Usage | None = None,
    ) -> LLMError:
        """The error of a 200 answer that is not a chat completion (logged here)."""
        self._log_failure(purpose, model, attempts, started, f"HTTP 200, {kind}")
        return LLMError(
            f"{purpose}: the model server answered HTTP 200 after {attempts} attempt(s), "
            f"but not with a chat completion: {what}",
            kind=kind,
            usage=(reported or Usage()) + Usage(failed_requests=attempts),
            attempts=attempts,
            status=200,
        )

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
        if reported is not None and reported.prompt_tokens:
            self.estimator.observe(prompt_chars, reported.prompt_tokens)
            usage = Usage(
                reported.prompt_tokens,
                reported.completion_tokens or 0,
                1,
                failed_requests=failed_requests,
            )
        else:
            answer = (content or "") + "".join(c.arguments for c in calls)
            usage = Usage(
                self.estimator.tokens_for_chars(prompt_chars),
                self.estimator.tokens(answer),
                1,
                estimated=True,
                failed_requests=failed_requests,
            )
        return ChatResult(content, calls, choice.finish_reason, usage)


def _completion_problem(completion: Any) -> tuple[str, str] | None:
    """Why a 200 answer is not a chat completion (the error kind and what is wrong), or
    ``None``. The library hands over a body that is not JSON as a str, one that is JSON
    but not an object as it is."""
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
    """The tokens an answer that is not a chat completion reports spent (none if it
    reports none)."""
    reported = getattr(completion, "usage", None)
    prompt, answer = (
        getattr(reported, name, None) for name in ("prompt_tokens", "completion_tokens")
    )
    return Usage(prompt if isinstance(prompt, int) else 0, answer if isinstance(answer, int) else 0)


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
