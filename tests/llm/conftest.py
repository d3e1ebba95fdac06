"""Fixtures of the tulip_memory.llm tests: the chat-server test double and clients on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.chat_server import ChatServerDouble
from tulip_memory.llm.client import ChatClient
from tulip_memory.llm.config import LLMConfig


@pytest.fixture
def server() -> Iterator[ChatServerDouble]:
    with ChatServerDouble() as double:
        yield double


def make_client(server: ChatServerDouble, **options: object) -> ChatClient:
    settings = {
        "BASE_URL": server.url,
        "MODEL": "test-model",
        "RETRY_BACKOFF": 0.01,
        "TIMEOUT": 5.0,
        **options,
    }
    return ChatClient(LLMConfig.from_dict(settings))


@pytest.fixture
def client(server: ChatServerDouble) -> ChatClient:
    return make_client(server)
