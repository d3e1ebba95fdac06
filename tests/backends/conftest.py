"""Fixtures of the checkpointer contract suite: one entry per backend in ``BACKENDS``.

Each entry builds a fresh checkpointer against the real thing: the embedded PostgreSQL
and the machine's MariaDB (ORM backends, transactional tests), the machine's Redis (a
unique key prefix per test, removed afterwards; db 0 is shared with the Celery broker,
so nothing is flushed), moto's S3 server started here on 127.0.0.1, and — the one test
double — an in-process fake of the OpenSearch endpoints (see ``opensearch_fake.py``).
Adding a backend is one entry.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.backends.opensearch_fake import FakeOpenSearch
from tulip_memory.backends import (
    FileCheckpointer,
    MemoryCheckpointer,
    MySQLCheckpointer,
    OpenSearchCheckpointer,
    PostgreSQLCheckpointer,
    RedisCheckpointer,
    S3Checkpointer,
)
from tulip_memory.delta import DeltaCheckpointer, InMemoryDeltaStorage, ORMDeltaStorage

REDIS_URL = "redis://127.0.0.1:6379/0"
TENANT = "tenant-a"
ORM_DBS = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """moto's S3 server (the real HTTP protocol) on a free port of 127.0.0.1."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def s3_backend(endpoint: str, **options: Any) -> S3Checkpointer:
    return S3Checkpointer(
        f"tulip-{uuid.uuid4().hex[:12]}",
        create_bucket=True,
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        **options,
    )


@pytest.fixture(scope="session")
def opensearch_fake() -> Iterator[FakeOpenSearch]:
    fake = FakeOpenSearch().start()
    yield fake
    fake.stop()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix unique to the test; its keys are deleted afterwards."""
    import redis

    prefix = f"tulip-test:{uuid.uuid4().hex}:"
    yield prefix
    with redis.Redis.from_url(REDIS_URL) as client:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)


def _memory(request: pytest.FixtureRequest) -> Any:
    return MemoryCheckpointer()


def _file(request: pytest.FixtureRequest) -> Any:
    return FileCheckpointer(request.getfixturevalue("tmp_path") / "checkpoints")


def _redis(request: pytest.FixtureRequest) -> Any:
    return RedisCheckpointer(REDIS_URL, prefix=request.getfixturevalue("redis_prefix"))


def _postgresql(request: pytest.FixtureRequest) -> Any:
    request.getfixturevalue("transactional_db")
    return PostgreSQLCheckpointer("default", tenant=TENANT)


def _mysql(request: pytest.FixtureRequest) -> Any:
    request.getfixturevalue("transactional_db")
    return MySQLCheckpointer("mysql", tenant=TENANT)


def _s3(request: pytest.FixtureRequest) -> Any:
    return s3_backend(request.getfixturevalue("s3_endpoint"))


def _opensearch(request: pytest.FixtureRequest) -> Any:
    fake = request.getfixturevalue("opensearch_fake")
    return OpenSearchCheckpointer(fake.url, index=f"ckpt-{uuid.uuid4().hex[:12]}")


def _delta_memory(request: pytest.FixtureRequest) -> Any:
    return DeltaCheckpointer(InMemoryDeltaStorage(), max_chain_depth=3)


def _delta_postgresql(request: pytest.FixtureRequest) -> Any:
    request.getfixturevalue("transactional_db")
    return DeltaCheckpointer(ORMDeltaStorage("default", tenant=TENANT), max_chain_depth=3)


def _delta_mysql(request: pytest.FixtureRequest) -> Any:
    request.getfixturevalue("transactional_db")
    return DeltaCheckpointer(ORMDeltaStorage("mysql", tenant=TENANT), max_chain_depth=3)


BACKENDS: dict[str, tuple[Callable[[pytest.FixtureRequest], Any], tuple[Any, ...]]] = {
    "memory": (_memory, ()),
    "file": (_file, ()),
    "redis": (_redis, ()),
    "postgresql": (_postgresql, (ORM_DBS,)),
    "mysql": (_mysql, (ORM_DBS,)),
    "s3": (_s3, ()),
    "opensearch-fake": (_opensearch, ()),
    "delta-memory": (_delta_memory, ()),
    "delta-postgresql": (_delta_postgresql, (ORM_DBS,)),
    "delta-mysql": (_delta_mysql, (ORM_DBS,)),
}


@pytest.fixture(params=[pytest.param(name, marks=marks) for name, (_, marks) in BACKENDS.items()])
async def checkpointer(request: pytest.FixtureRequest) -> Any:
    backend = BACKENDS[request.param][0](request)
    yield backend
    await backend.aclose()
