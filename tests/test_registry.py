"""tulip_memory.registry: strings to checkpointers, custom providers, the setting."""

from __future__ import annotations

import sys

import pytest
from django.test import override_settings

from tulip_memory.backends import (
    FileCheckpointer,
    MemoryCheckpointer,
    MySQLCheckpointer,
    OpenSearchCheckpointer,
    PostgreSQLCheckpointer,
    RedisCheckpointer,
    S3Backend,
    S3Checkpointer,
)
from tulip_memory.delta import DeltaCheckpointer, InMemoryDeltaStorage, ORMDeltaStorage
from tulip_memory.registry import get_checkpointer, list_checkpointers, register_checkpointer


def custom_factory(config_hint=None, **kwargs):
    checkpointer = MemoryCheckpointer()
    checkpointer.hint = config_hint
    checkpointer.options = kwargs
    return checkpointer


@pytest.fixture(autouse=True)
def _clean_registry():
    from tulip_memory import registry

    saved = dict(registry._REGISTERED)
    yield
    registry._REGISTERED.clear()
    registry._REGISTERED.update(saved)


def test_the_references_examples(tmp_path):
    assert isinstance(get_checkpointer("memory"), MemoryCheckpointer)
    file = get_checkpointer(f"file:{tmp_path}/checkpoints")
    assert isinstance(file, FileCheckpointer) and file.base_dir == tmp_path / "checkpoints"
    redis = get_checkpointer("redis:localhost:6379")
    assert isinstance(redis, RedisCheckpointer) and redis.url == "redis://localhost:6379"
    assert get_checkpointer("redis:rediss://h:1/2").url == "rediss://h:1/2"
    postgresql = get_checkpointer("postgresql:default")
    assert isinstance(postgresql, PostgreSQLCheckpointer) and postgresql.using == "default"
    mysql = get_checkpointer("mysql:mysql")
    assert isinstance(mysql, MySQLCheckpointer) and mysql.using == "mysql"
    assert isinstance(get_checkpointer("opensearch"), OpenSearchCheckpointer)
    assert get_checkpointer("opensearch:http://search:9200").hosts == "http://search:9200"
    s3 = get_checkpointer("s3:my-bucket", region_name="eu-west-1")
    assert isinstance(s3, S3Backend) and s3.bucket == "my-bucket"
    assert S3Backend is S3Checkpointer  # the first name stays importable
    delta = get_checkpointer("delta", max_chain_depth=7)
    assert isinstance(delta, DeltaCheckpointer) and delta.max_chain_depth == 7
    assert isinstance(delta.storage, InMemoryDeltaStorage)
    assert isinstance(get_checkpointer("delta:default").storage, ORMDeltaStorage)


def test_unknown_provider_lists_the_available_ones():
    with pytest.raises(ValueError, match=r"Unknown checkpointer provider 'nope'.*'file'.*'s3'"):
        get_checkpointer("nope:x")
    for bad in ("", "  ", None, 3):
        with pytest.raises(ValueError, match="checkpointer string"):
            get_checkpointer(bad)
    with pytest.raises(ValueError, match="empty hint"):
        get_checkpointer("file:")
    with pytest.raises(ValueError, match="takes no ':hint'"):
        get_checkpointer("memory:x")
    with pytest.raises(ValueError, match="needs a bucket"):
        get_checkpointer("s3")
    with pytest.raises(ValueError, match="needs a Django alias"):
        get_checkpointer("mysql")


def test_register_and_list():
    assert {"memory", "file", "redis", "postgresql", "mysql", "opensearch", "s3", "delta"} <= set(
        list_checkpointers()
    )
    register_checkpointer("custom", custom_factory)
    assert "custom" in list_checkpointers()
    built = get_checkpointer("custom:some:hint", answer=42)
    assert built.hint == "some:hint" and built.options == {"answer": 42}
    assert get_checkpointer("custom").hint is None
    for name in ("", "a:b", None):
        with pytest.raises(ValueError, match="provider name"):
            register_checkpointer(name, custom_factory)
    with pytest.raises(ValueError, match="must be callable"):
        register_checkpointer("x", "not callable")


def test_providers_from_the_setting():
    with override_settings(
        TULIP_MEMORY={"CHECKPOINTERS": {"mine": "tests.test_registry.custom_factory"}}
    ):
        assert "mine" in list_checkpointers()
        assert get_checkpointer("mine:h").hint == "h"
    assert "mine" not in list_checkpointers()


@pytest.mark.parametrize(
    ("string", "module", "extra"),
    [
        ("redis:localhost", "redis", "redis"),
        ("s3:bucket", "boto3", "s3"),
        ("opensearch", "opensearchpy", "opensearch"),
        ("mysql:mysql", "MySQLdb", "mysql"),
    ],
)
def test_a_missing_extra_fails_on_use_naming_it(monkeypatch, string, module, extra):
    for name in list(sys.modules):
        if name == module or name.startswith(f"{module}."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like
    with pytest.raises(ImportError, match=rf"pip install 'tulip-memory\[{extra}\]'"):
        get_checkpointer(string)


def test_system_check_e030():
    from tulip_memory.checks.checkpoints import check_checkpointer_settings

    assert check_checkpointer_settings() == []
    for value, problem in (
        (["x"], "must be a dict"),
        ({"a:b": "tests.test_registry.custom_factory"}, "cannot contain ':'"),
        ({"gone": "tests.backends.nowhere.factory"}, "nowhere"),
        ({"num": "tests.backends.conftest.TENANT"}, "is not callable"),
    ):
        with override_settings(TULIP_MEMORY={"CHECKPOINTERS": value}):
            (error,) = check_checkpointer_settings()
            assert error.id == "tulip_memory.E030" and problem in error.msg
