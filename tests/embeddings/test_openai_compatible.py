"""OpenAIEmbedding against a TEST DOUBLE of the /v1/embeddings protocol on 127.0.0.1.

The server (:mod:`tests.embeddings.embeddings_server`) is not a model: it returns
deterministic vectors in OpenAI's wire format and can be scripted to fail, stall, or
answer another width, so batching, retries, timeouts and the width check are tested
through the real ``openai`` client library and real HTTP.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync

from tests.embeddings.embeddings_server import EmbeddingServerDouble, vector_of
from tests.llm.chat_server import Reply, dripping_server, established_connections
from tulip_memory.embeddings import OpenAIEmbedding, load_embedder
from tulip_memory.exceptions import EmbeddingError


@pytest.fixture
def server():
    with EmbeddingServerDouble(width=8) as double:
        yield double


def embedder_on(server, **options) -> OpenAIEmbedding:
    settings = {"retry_backoff": 0.01, "timeout": 5.0, **options}
    return OpenAIEmbedding(
        "test-embed", settings.pop("dimension", 8), base_url=server.url, **settings
    )


async def test_vectors_come_back_in_order_in_batches(server):
    embedder = embedder_on(server, batch_size=2)
    texts = ["green tea", "dark mode", "a red car", "sailing"]
    vectors = await embedder.embed_batch(texts)
    assert vectors == [vector_of(text, 8) for text in texts]  # JSON floats round-trip
    assert [r.body["input"] for r in server.requests] == [texts[:2], texts[2:]]
    assert {r.path for r in server.requests} == {"/v1/embeddings"}
    body = server.requests[0].body
    assert body["model"] == "test-embed" and body["encoding_format"] == "float"
    assert "dimensions" not in body
    assert await embedder.embed("sailing") == vector_of("sailing", 8)
    assert embedder.dimension == 8 and embedder.model_name == "openai:test-embed"
    await embedder.aclose()


async def test_request_dimensions_sends_the_width(server):
    embedder = embedder_on(server, dimension=4, request_dimensions=True)
    assert len(await embedder.embed("tea")) == 4
    assert server.requests[0].body["dimensions"] == 4


async def test_another_width_is_a_clear_error(server):
    server.add(Reply(answer={"width": 5}))
    with pytest.raises(EmbeddingError, match=r"answered 5-wide vectors.*declared 8 wide") as info:
        await embedder_on(server).embed_batch(["tea"])
    assert info.value.kind == "wrong_width"
    assert "dimension=5" in str(info.value)


async def test_too_few_vectors_is_malformed(server):
    server.add(Reply(answer={"drop": 1}))
    with pytest.raises(EmbeddingError, match="1 vectors for 2 texts") as info:
        await embedder_on(server).embed_batch(["tea", "coffee"])
    assert info.value.kind == "malformed_output"


async def test_server_errors_and_429_are_retried_with_backoff(server):
    server.add(Reply(status=500), Reply(status=429, headers={"Retry-After": "0.05"}))
    started = time.perf_counter()
    vectors = await embedder_on(server).embed_batch(["tea"])
    assert vectors == [vector_of("tea", 8)]
    assert len(server.requests) == 3
    assert time.perf_counter() - started >= 0.05  # the Retry-After was honoured


async def test_retries_end_with_an_error_naming_the_status(server):
    server.add(*[Reply(status=503) for _ in range(3)])
    with pytest.raises(EmbeddingError, match="HTTP 503 after 3 attempt") as info:
        await embedder_on(server, max_retries=2).embed_batch(["tea"])
    assert (info.value.kind, info.value.status, info.value.attempts) == ("server_error", 503, 3)


async def test_a_4xx_is_not_retried(server):
    server.add(Reply(status=400, content="model not found"))
    with pytest.raises(EmbeddingError, match=r"HTTP 400 after 1 attempt.*model not found") as info:
        await embedder_on(server).embed_batch(["tea"])
    assert info.value.kind == "rejected" and len(server.requests) == 1


async def test_timeouts_are_retried_then_reported(server):
    server.add(Reply(delay=1.0), Reply(delay=1.0))
    with pytest.raises(EmbeddingError, match="timeout") as info:
        await embedder_on(server, timeout=0.2, max_retries=1).embed_batch(["tea"])
    assert info.value.kind == "timeout" and info.value.attempts == 2


async def test_a_remote_endpoint_needs_its_key_and_sends_it(server, monkeypatch):
    monkeypatch.delenv("TEST_EMBED_KEY", raising=False)
    remote = OpenAIEmbedding(
        "m", 8, base_url="https://embeddings.example.com/v1", api_key_env="TEST_EMBED_KEY"
    )
    with pytest.raises(EmbeddingError, match="set the environment variable TEST_EMBED_KEY"):
        await remote.embed("tea")
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test")
    await embedder_on(server, api_key_env="TEST_EMBED_KEY").embed("tea")
    assert server.requests[-1].headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (("", 8), {}, "model must be a model name"),
        (("m", 0), {}, "dimension must be an int >= 1"),
        (("m", True), {}, "dimension must be an int"),
        (("m", 8), {"base_url": "ftp://x"}, "base_url must be an http"),
        (("m", 8), {"batch_size": 0}, "batch_size must be an int >= 1"),
        (("m", 8), {"timeout": 0}, "timeout must be a number"),
        (("m", 8), {"max_retries": -1}, "max_retries must be an int >= 0"),
        (("m", 8), {"api_key_env": ""}, "api_key_env must name"),
    ],
)
def test_bad_options_are_refused(args, options, message):
    with pytest.raises(ValueError, match=message):
        OpenAIEmbedding(*args, **options)


async def test_bad_texts_are_refused_before_any_request(server):
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        await embedder_on(server).embed_batch(["tea", " "])
    assert server.requests == []


def test_it_is_built_from_settings_by_dotted_path(server):
    embedder = load_embedder(
        "tulip_memory.embeddings.OpenAIEmbedding",
        {"model": "test-embed", "dimension": 8, "base_url": server.url},
    )
    assert isinstance(embedder, OpenAIEmbedding) and embedder.base_url == server.url


# A client per event loop, closed with its loop: async_to_sync (the sync facades, Celery
# workers, the admin) runs each call on a new loop, which must not leave a client, a
# keep-alive socket and the closed loop behind.


@pytest.fixture
def keep_alive_server():
    with EmbeddingServerDouble(width=8, keep_alive=True) as double:
        yield double


def test_async_to_sync_calls_leave_no_client_or_socket_behind(keep_alive_server):
    embedder = embedder_on(keep_alive_server)
    for _ in range(50):
        assert async_to_sync(embedder.embed)("tea") == vector_of("tea", 8)
    gc.collect()
    assert len(keep_alive_server.requests) == 50
    assert len(embedder._clients) <= 1
    sockets = established_connections(keep_alive_server.port)
    assert sockets is None or sockets <= 1


def test_loops_closed_without_shutting_down_are_dropped_without_error(keep_alive_server):
    embedder = embedder_on(keep_alive_server)
    for _ in range(20):
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(embedder.embed("tea"))
        finally:
            loop.close()  # no shutdown_asyncgens(): the client outlives its loop
    assert len(embedder._clients) <= 1
    gc.collect()
    sockets = established_connections(keep_alive_server.port)
    assert sockets is None or sockets <= 2
    asyncio.run(embedder.aclose())  # closing a client of a closed loop does not raise
    assert len(embedder._clients) == 0


async def test_one_loop_keeps_one_client_and_connection(keep_alive_server):
    embedder = embedder_on(keep_alive_server)
    for _ in range(10):
        await embedder.embed("tea")
    assert len(embedder._clients) == 1
    sockets = established_connections(keep_alive_server.port)
    assert sockets is None or sockets == 1
    await embedder.aclose()
    assert len(embedder._clients) == 0


# A 200 answer that is not a list of vectors of finite numbers is an EmbeddingError (the
# stores fall back to ranking by words on it), never a JSONDecodeError or a TypeError,
# and never a vector of null, strings or NaN.


def _answer(*embeddings: object, indexes: list[object] | None = None) -> str:
    indexes = list(range(len(embeddings))) if indexes is None else indexes
    data = [
        {"object": "embedding", "index": i, "embedding": e}
        for i, e in zip(indexes, embeddings, strict=True)
    ]
    return json.dumps({"object": "list", "data": data, "model": "m"})


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param("not json", "application/json", id="garbage"),
        pytest.param(_answer([0.1] * 8)[:-7], "application/json", id="truncated"),
        pytest.param("", "application/json", id="empty"),
        pytest.param("<html>bad gateway</html>", "text/html", id="html"),
        pytest.param(json.dumps([1, 2]), "application/json", id="a-list"),
        pytest.param(
            json.dumps({"object": "list", "data": None}), "application/json", id="no-data"
        ),
        pytest.param(json.dumps({"data": {"x": 1}}), "application/json", id="data-not-a-list"),
        pytest.param(_answer(None), "application/json", id="embedding-null"),
        pytest.param(_answer("AAAAAAAAAAA="), "application/json", id="embedding-a-string"),
        pytest.param(_answer([None] * 8), "application/json", id="null-values"),
        pytest.param(_answer(["a"] * 8), "application/json", id="string-values"),
        pytest.param(_answer([True] * 8), "application/json", id="bool-values"),
        pytest.param(_answer([0.1] * 7 + [None]), "application/json", id="one-null-value"),
        pytest.param(
            _answer([0.1] * 8).replace("0.1]", "NaN]"), "application/json", id="nan-value"
        ),
        pytest.param(
            _answer([0.1] * 8).replace("0.1]", "Infinity]"), "application/json", id="infinity"
        ),
        pytest.param(_answer([0.1] * 8, indexes=[None]), "application/json", id="no-index"),
        pytest.param(_answer([0.1] * 8, indexes=["0"]), "application/json", id="str-index"),
    ],
)
async def test_a_malformed_200_is_an_embedding_error(server, body, content_type):
    server.add(Reply(body=body, content_type=content_type))
    with pytest.raises(EmbeddingError) as info:
        await embedder_on(server).embed_batch(["tea"])
    assert info.value.kind == "malformed_output" and info.value.status == 200
    assert len(server.requests) == 1  # not retried


async def test_a_repeated_index_is_malformed(server):
    server.add(Reply(body=_answer([0.1] * 8, [0.2] * 8, indexes=[0, 0])))
    with pytest.raises(EmbeddingError) as info:
        await embedder_on(server).embed_batch(["tea", "coffee"])
    assert info.value.kind == "malformed_output"


async def test_integer_values_are_returned_as_floats(server):
    server.add(Reply(body=_answer([1, 0, 0, 0, 0, 0, 0, 0])))
    vector = await embedder_on(server).embed("tea")
    assert vector == [1.0] + [0.0] * 7 and all(type(value) is float for value in vector)


# ``timeout`` bounds each attempt as a whole, not each network read: a server that drips
# its answer a byte at a time times out (and is retried) like one that stalls.


@pytest.fixture
def dripping() -> Iterator[str]:
    with dripping_server(_answer([0.1] * 8).encode()) as url:
        yield url


async def test_a_dripping_answer_times_out_and_is_retried(dripping):
    embedder = OpenAIEmbedding(
        "m", 8, base_url=dripping, timeout=0.3, max_retries=1, retry_backoff=0.01
    )
    await embedder.aclose()  # nothing to close yet
    started = time.perf_counter()
    with pytest.raises(EmbeddingError, match="timeout") as info:
        await embedder.embed("tea")
    elapsed = time.perf_counter() - started
    assert info.value.kind == "timeout" and info.value.attempts == 2
    assert elapsed < 3.0  # two attempts of 0.3 s, not the ~20 s the answer takes
    await embedder.aclose()


# The key is read from the environment at each request: a rotated key is sent by the next
# request, a removed one no longer is.


async def test_a_rotated_or_removed_key_is_used_at_the_next_request(server, monkeypatch):
    embedder = embedder_on(server, api_key_env="TEST_EMBED_KEY")
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-old")
    await embedder.embed("tea")
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-rotated")
    await embedder.embed("tea")
    monkeypatch.delenv("TEST_EMBED_KEY")
    await embedder.embed("tea")  # a local server needs no key
    sent = [r.headers["authorization"] for r in server.requests]
    assert sent == ["Bearer sk-old", "Bearer sk-rotated", "Bearer not-needed"]
    assert len(embedder._clients) == 1  # one client all along
    await embedder.aclose()
