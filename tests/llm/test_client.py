"""ChatClient against the chat-server test double (tests/llm/chat_server.py): the request
it sends, retries (429 + Retry-After, 5xx, timeouts), the concurrency cap, usage, logs."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import logging
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import async_to_sync

from tests.llm.chat_server import (
    ChatServerDouble,
    Reply,
    dripping_server,
    established_connections,
)
from tests.llm.conftest import make_client
from tulip_memory.exceptions import LLMError
from tulip_memory.llm.client import ChatClient, retry_after_seconds
from tulip_memory.llm.config import LLMConfig
from tulip_memory.llm.usage import Usage

HELLO = [{"role": "user", "content": "hello"}]


async def test_request_and_usage(server, client, caplog):
    server.add(Reply(content="hi there"))
    with caplog.at_level(logging.DEBUG, logger="tulip_memory.llm"):
        result = await client.complete(HELLO, max_tokens=50, purpose="greeting")
    assert result.content == "hi there"
    assert result.finish_reason == "stop"
    assert result.usage.calls == 1 and result.usage.prompt_tokens > 0
    assert not result.usage.estimated and result.usage.failed_requests == 0
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "test-model"
    assert request.body["messages"] == HELLO
    assert request.body["max_tokens"] == 50
    assert request.body["temperature"] == 0.0
    lines = [r.getMessage() for r in caplog.records if r.name == "tulip_memory.llm"]
    assert any("llm call greeting" in line and "prompt_tokens=" in line for line in lines)
    assert not any("hello" in line for line in lines)  # no content in the log


async def test_usage_is_estimated_when_the_server_reports_none(server, client):
    server.add(Reply(content="x" * 40, usage=False))
    result = await client.complete(HELLO, max_tokens=50)
    assert result.usage == Usage(prompt_tokens=2, completion_tokens=10, calls=1, estimated=True)


async def test_reported_usage_corrects_the_estimator(server, client):
    before = client.estimator.chars_per_token
    server.add(Reply(content="ok"))
    await client.complete([{"role": "user", "content": "a" * 400}], max_tokens=5)
    assert client.estimator.chars_per_token != before


async def test_429_with_retry_after_is_honoured(server, client):
    server.add(Reply(status=429, headers={"Retry-After": "0.3"}), Reply(content="done"))
    started = time.perf_counter()
    result = await client.complete(HELLO, max_tokens=5)
    assert result.content == "done"
    assert time.perf_counter() - started >= 0.3
    assert len(server.requests) == 2 and result.usage.failed_requests == 1


async def test_retry_after_beyond_the_backoff_max_ends_the_retries(server):
    client = make_client(server, RETRY_BACKOFF_MAX=1.0)
    server.add(Reply(status=429, headers={"Retry-After": "120"}), Reply(content="never"))
    with pytest.raises(LLMError) as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "rate_limited" and caught.value.status == 429
    assert caught.value.attempts == 1 and len(server.requests) == 1


async def test_429_after_every_retry_raises_rate_limited(server):
    client = make_client(server, MAX_RETRIES=2)
    server.add(*[Reply(status=429, headers={"retry-after-ms": "10"}) for _ in range(3)])
    with pytest.raises(LLMError) as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "rate_limited"
    assert caught.value.attempts == 3 and len(server.requests) == 3
    assert caught.value.usage == Usage(failed_requests=3)  # no tokens, three requests


async def test_500_then_success(server, client):
    server.add(Reply(status=500), Reply(status=503), Reply(content="ok"))
    result = await client.complete(HELLO, max_tokens=5)
    assert result.content == "ok" and len(server.requests) == 3
    assert (result.usage.calls, result.usage.failed_requests) == (1, 2)


async def test_5xx_after_every_retry(server):
    client = make_client(server, MAX_RETRIES=1)
    server.add(Reply(status=502), Reply(status=500))
    with pytest.raises(LLMError, match="HTTP 500 after 2 attempt") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "server_error"


async def test_timeout(server):
    client = make_client(server, TIMEOUT=0.3, MAX_RETRIES=1)
    server.add(Reply(content="late", delay=2), Reply(content="late", delay=2))
    started = time.perf_counter()
    with pytest.raises(LLMError) as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "timeout" and caught.value.attempts == 2
    assert caught.value.usage == Usage(failed_requests=2)
    assert time.perf_counter() - started < 1.9


async def test_a_dripping_answer_times_out_and_is_retried():
    # TIMEOUT bounds each attempt as a whole, not each network read.
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    with dripping_server(json.dumps(completion).encode()) as url:
        client = ChatClient(
            LLMConfig.from_dict(
                {
                    "BASE_URL": url,
                    "MODEL": "test-model",
                    "TIMEOUT": 0.3,
                    "MAX_RETRIES": 1,
                    "RETRY_BACKOFF": 0.01,
                }
            )
        )
        started = time.perf_counter()
        with pytest.raises(LLMError) as caught:
            await client.complete(HELLO, max_tokens=5)
        assert caught.value.kind == "timeout" and caught.value.attempts == 2
        assert caught.value.usage == Usage(failed_requests=2)
        assert time.perf_counter() - started < 3.0  # not the ~20 s the answer takes
        await client.aclose()


async def test_a_4xx_is_not_retried(server, client):
    server.add(Reply(status=401, content="bad key"), Reply(content="never"))
    with pytest.raises(LLMError, match="HTTP 401") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "rejected" and len(server.requests) == 1
    assert caught.value.usage == Usage(failed_requests=1)


async def test_connection_refused(server):
    url = server.url
    server.stop()
    client = ChatClient(
        LLMConfig.from_dict({"BASE_URL": url, "MODEL": "m", "MAX_RETRIES": 1, "RETRY_BACKOFF": 0})
    )
    with pytest.raises(LLMError) as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "connection" and caught.value.attempts == 2
    assert caught.value.usage == Usage(failed_requests=2)


async def test_api_key_read_from_the_environment_and_never_logged(server, monkeypatch, caplog):
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test-0123456789abcdefSECRET")
    client = make_client(server, API_KEY_ENV="TEST_LLM_KEY")
    server.add(Reply(content="ok"))
    with caplog.at_level(logging.DEBUG):
        await client.complete(HELLO, max_tokens=5)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test-0123456789abcdefSECRET"
    assert "SECRET" not in caplog.text
    assert "SECRET" not in repr(client) and "SECRET" not in repr(client.config)
    monkeypatch.setenv("TEST_LLM_KEY", "sk-rotated")
    server.add(Reply(content="ok"))
    await client.complete(HELLO, max_tokens=5)
    assert server.requests[1].headers["authorization"] == "Bearer sk-rotated"


async def test_a_remote_server_without_a_key_is_a_configuration_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    client = ChatClient(
        LLMConfig.from_dict(
            {
                "BASE_URL": "https://llm.example.com/v1",
                "MODEL": "m",
                "API_KEY_ENV": "NO_SUCH_KEY_VAR",
            }
        )
    )
    with pytest.raises(LLMError, match="NO_SUCH_KEY_VAR") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "configuration"


async def test_no_model_is_a_configuration_error(server):
    client = make_client(server, MODEL=None)
    with pytest.raises(LLMError, match="MODEL") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "configuration" and not server.requests


async def test_concurrency_cap_holds_across_calls(server):
    client = make_client(server, MAX_CONCURRENCY=2)
    server.add(*[Reply(content="ok", delay=0.25) for _ in range(4)])
    started = time.perf_counter()
    await asyncio.gather(*(client.complete(HELLO, max_tokens=5) for _ in range(4)))
    assert time.perf_counter() - started >= 0.5  # two waves of two
    assert client.limiter.in_use == 0


def test_one_client_serves_several_event_loops(server, client):
    server.add(Reply(content="one"), Reply(content="two"))
    assert asyncio.run(client.complete(HELLO, max_tokens=5)).content == "one"
    assert asyncio.run(client.complete(HELLO, max_tokens=5)).content == "two"


def test_async_to_sync_calls_leave_no_client_or_socket_behind():
    # async_to_sync runs each call on a new event loop: a client (and its keep-alive
    # socket) per loop must not outlive the loop.
    with ChatServerDouble(keep_alive=True) as server:
        client = make_client(server)
        server.add(*[Reply(content=str(n)) for n in range(50)])
        for n in range(50):
            assert async_to_sync(client.complete)(HELLO, max_tokens=5).content == str(n)
        gc.collect()
        assert len(client._clients) <= 1
        sockets = established_connections(server.port)
        assert sockets is None or sockets <= 1


async def test_one_loop_keeps_one_client_and_connection():
    with ChatServerDouble(keep_alive=True) as server:
        client = make_client(server)
        server.add(*[Reply(content="hi") for _ in range(5)])
        for _ in range(5):
            await client.complete(HELLO, max_tokens=5)
        assert len(client._clients) == 1
        sockets = established_connections(server.port)
        assert sockets is None or sockets == 1
        await client.aclose()
        assert len(client._clients) == 0
        sockets = established_connections(server.port)
        assert sockets is None or sockets == 0


def test_clients_of_loops_closed_without_shutting_down_are_dropped():
    with ChatServerDouble(keep_alive=True) as server:
        client = make_client(server)
        server.add(*[Reply(content="hi") for _ in range(10)])
        for _ in range(10):
            loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(client.complete(HELLO, max_tokens=5))
            finally:
                loop.close()  # no shutdown_asyncgens(): the client outlives its loop
        assert len(client._clients) <= 1
        asyncio.run(client.aclose())  # closing a client of a closed loop does not raise
        assert len(client._clients) == 0


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_retry_after_as_a_date_without_a_zone_is_utc():
    """``-0000`` is "UTC, local zone unknown": the date parses without a zone."""
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=30)
    header = email.utils.format_datetime(later)
    assert header.endswith("-0000")
    assert 25 < retry_after_seconds({"retry-after": header}) <= 30


async def test_429_with_a_retry_after_date_without_a_zone_is_retried(server, client):
    past = "Wed, 21 Oct 2015 07:28:00 -0000"
    server.add(Reply(status=429, headers={"Retry-After": past}), Reply(content="done"))
    result = await client.complete(HELLO, max_tokens=5)
    assert result.content == "done" and result.usage.failed_requests == 1
    assert len(server.requests) == 2


async def test_a_future_retry_after_date_without_a_zone_is_waited_for_as_utc(
    server, client, monkeypatch
):
    # In a zone far from UTC, reading "-0000" as local time would wait hours (no retry).
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        later = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=2)
        header = email.utils.format_datetime(later)
        server.add(Reply(status=429, headers={"Retry-After": header}), Reply(content="done"))
        started = time.perf_counter()
        result = await client.complete(HELLO, max_tokens=5)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.content == "done" and len(server.requests) == 2
    assert 0.5 < time.perf_counter() - started < 3


@pytest.mark.parametrize(
    ("backoff", "backoff_max"), [(0.01, 30.0), (10.0, 0.05)], ids=["backoff", "backoff max"]
)
async def test_the_configured_backoff_sets_the_delay_between_attempts(server, backoff, backoff_max):
    client = make_client(server, RETRY_BACKOFF=backoff, RETRY_BACKOFF_MAX=backoff_max)
    server.add(Reply(status=500), Reply(status=503), Reply(content="ok"))
    started = time.perf_counter()
    result = await client.complete(HELLO, max_tokens=5)
    assert result.content == "ok" and result.usage.failed_requests == 2
    assert time.perf_counter() - started < 0.3  # the library's own delays are 0.5 s and more


_COMPLETION_FIELDS = {"id": "x", "object": "chat.completion", "created": 0, "model": "m"}


@pytest.mark.parametrize(
    ("reply", "kind", "problem"),
    [
        (
            Reply(body="<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
            "malformed_output",
            "the body is not a JSON object",
        ),
        (Reply(body="<html>proxy error</html>"), "malformed_output", "the body is not JSON"),
        (Reply(body='["not", "a", "completion"]'), "malformed_output", "not a JSON object"),
        (Reply(body=json.dumps(_COMPLETION_FIELDS)), "malformed_output", "no choices"),
        (
            Reply(body=json.dumps({**_COMPLETION_FIELDS, "choices": None})),
            "malformed_output",
            "no choices",
        ),
        (
            Reply(body=json.dumps({**_COMPLETION_FIELDS, "choices": [{"index": 0}]})),
            "malformed_output",
            "no choices with a message",
        ),
        (
            Reply(body=json.dumps({"error": {"message": "model overloaded", "code": 503}})),
            "server_error",
            "the body is an error: model overloaded",
        ),
    ],
    ids=[
        "html page",
        "html declared as json",
        "json list",
        "no choices",
        "choices null",
        "choice without message",
        "error object",
    ],
)
async def test_a_200_that_is_not_a_chat_completion_is_an_llm_error(
    server, client, reply, kind, problem
):
    server.add(reply, Reply(content="never"))
    with pytest.raises(LLMError, match="HTTP 200 after 1 attempt") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert problem in str(caught.value)
    assert caught.value.kind == kind and caught.value.status == 200
    assert caught.value.attempts == 1 and len(server.requests) == 1  # not retried
    assert caught.value.usage == Usage(failed_requests=1)


async def test_tokens_reported_without_a_completion_are_counted(server, client):
    spent = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    server.add(Reply(status=500), Reply(body=json.dumps({**_COMPLETION_FIELDS, "usage": spent})))
    with pytest.raises(LLMError, match="no choices") as caught:
        await client.complete(HELLO, max_tokens=5)
    assert caught.value.kind == "malformed_output" and caught.value.attempts == 2
    assert caught.value.usage == Usage(prompt_tokens=7, completion_tokens=3, failed_requests=2)


async def test_missing_openai_names_the_extra(server, client, monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"tulip-memory\[llm\]"):
        await client.complete(HELLO, max_tokens=5)


async def test_bad_call_arguments(server, client):
    with pytest.raises(ValueError, match="messages must be a list of chat-completions dicts"):
        await client.complete("hello", max_tokens=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens must be an int >= 1"):
        await client.complete(HELLO, max_tokens=0)
    assert server.requests == []


def test_bad_config_argument():
    with pytest.raises(ValueError, match="config must be an LLMConfig"):
        ChatClient({"MODEL": "m"})  # type: ignore[arg-type]
