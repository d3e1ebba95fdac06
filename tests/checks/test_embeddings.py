"""System checks of the configured embedder: E020-E022, and W020 on stored rows."""

from __future__ import annotations

import os

import pytest
from asgiref.sync import async_to_sync
from django.core import checks
from django.test import override_settings

from tests.migration_connections import connect, with_database
from tulip_memory.checks.embeddings import (
    check_embedder_settings,
    check_embedding_sources,
    check_sources_on,
)
from tulip_memory.embeddings import HRR
from tulip_memory.store import PgMemory

CONFIGURED = {"EMBEDDER": "tulip_memory.embeddings.HRREmbedding", "EMBEDDER_OPTIONS": {"dim": 512}}
CONFIGURED_SOURCE = "embedder:tulip_memory.embeddings.hrr.HRREmbedding"


def _ids(messages):
    return [m.id for m in messages]


@pytest.mark.django_db  # plain check also looks at the default database's RLS
def test_defaults_and_a_fitting_embedder_pass():
    assert check_embedder_settings() == []
    with override_settings(TULIP_MEMORY=CONFIGURED):
        assert check_embedder_settings() == []
    ids = _ids(checks.run_checks())
    assert not [i for i in ids if i.startswith(("tulip_memory.E02", "tulip_memory.W02"))]


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"EMBEDDER": "tulip_memory.nowhere.Embedder"}, "ModuleNotFoundError"),
        ({**CONFIGURED, "EMBEDDER_OPTIONS": {"width": 3}}, "unexpected keyword argument 'width'"),
        ({**CONFIGURED, "EMBEDDER_OPTIONS": [512]}, "EMBEDDER_OPTIONS'] must be a dict"),
        ({"EMBEDDER": "tulip_memory.store.InMemoryStore"}, "not a BaseEmbedding"),
    ],
)
def test_an_embedder_that_cannot_be_built_is_e020(overrides, fragment):
    with override_settings(TULIP_MEMORY=overrides):
        [message] = check_embedder_settings()
    assert message.id == "tulip_memory.E020" and fragment in message.msg


def test_a_width_that_differs_from_vector_dimensions_is_e021():
    with override_settings(TULIP_MEMORY={**CONFIGURED, "EMBEDDER_OPTIONS": {"dim": 64}}):
        [message] = check_embedder_settings()
    assert message.id == "tulip_memory.E021"
    assert "VECTOR_DIMENSIONS'] is 1024" in message.msg and "128 dimensions" in message.msg
    assert "Set VECTOR_DIMENSIONS = 128" in message.hint
    # HRR: the width of PgMemory(dim=STORE_OPTIONS["dim"]), when STORE is PgMemory.
    with override_settings(TULIP_MEMORY={"STORE_OPTIONS": {"dim": 256}}):
        [message] = check_embedder_settings()
    assert message.id == "tulip_memory.E021" and "PgMemory(dim=256) is 512 wide" in message.msg
    with override_settings(
        TULIP_MEMORY={"STORE": "tulip_memory.store.InMemoryStore", "VECTOR_DIMENSIONS": 384}
    ):
        assert check_embedder_settings() == []  # HRR and no PgMemory: nothing to compare


def test_an_embedder_of_a_hosted_service_without_its_key_is_e022(monkeypatch):
    hosted = {
        "EMBEDDER": "tulip_memory.embeddings.OpenAIEmbedding",
        "EMBEDDER_OPTIONS": {
            "model": "m",
            "dimension": 1024,
            "base_url": "https://api.example.com/v1",
            "api_key_env": "TULIP_TEST_EMBEDDING_KEY",
        },
    }
    monkeypatch.delenv("TULIP_TEST_EMBEDDING_KEY", raising=False)
    with override_settings(TULIP_MEMORY=hosted):
        [message] = check_embedder_settings()
        assert message.id == "tulip_memory.E022"
        assert "no API key for https://api.example.com/v1" in message.msg
        assert "TULIP_TEST_EMBEDDING_KEY" in message.msg
        monkeypatch.setenv("TULIP_TEST_EMBEDDING_KEY", "k")
        assert check_embedder_settings() == []
    local = {**hosted["EMBEDDER_OPTIONS"], "base_url": "http://127.0.0.1:11434/v1"}
    monkeypatch.delenv("TULIP_TEST_EMBEDDING_KEY")
    with override_settings(TULIP_MEMORY={**hosted, "EMBEDDER_OPTIONS": local}):
        assert check_embedder_settings() == []  # a local server needs no key
    wide = {**hosted["EMBEDDER_OPTIONS"], "dimension": 64}
    with override_settings(TULIP_MEMORY={**hosted, "EMBEDDER_OPTIONS": wide}):
        assert _ids(check_embedder_settings()) == ["tulip_memory.E022", "tulip_memory.E021"]


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_rows_of_another_encoder_are_counted_as_w020():
    store = PgMemory(embedder=HRR)
    for tenant in ("acme", "globex"):
        async_to_sync(store.put_batch)(
            [((tenant, "notes"), f"k{i}", {"text": f"note {i} about tea"}, None) for i in range(3)]
        )
    admin_url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], "tulip_test")
    with connect(admin_url, "tulip_admin") as admin:  # a superuser sees every tenant
        assert check_sources_on(admin, "tulip_admin", "hrr") == []
        with override_settings(TULIP_MEMORY=CONFIGURED):
            [message] = check_sources_on(admin, "tulip_admin", CONFIGURED_SOURCE)
            # The application role sees no row without a pinned tenant: it counts tenant
            # by tenant (the registry's), each in a transaction pinned to it.
            [through_app] = check_embedding_sources(databases=["default"])
            # The owner (migrate --database=owner runs the checks) reads every tenant's
            # store items, so each tenant's count names its tenant.
            [through_owner] = check_embedding_sources(databases=["owner"])
            assert check_embedding_sources(databases=None) == []
    assert message.id == "tulip_memory.W020"
    assert "6 stored item(s)" in message.msg and "6 of 'hrr'" in message.msg
    assert "tulip_memory_reembed --database tulip_admin" in message.hint
    assert through_app.id == "tulip_memory.W020"
    assert "'default': 6 stored item(s) of 2 tenant(s) ('acme', 'globex')" in through_app.msg
    assert "(6 of 'hrr')" in through_app.msg
    assert "'owner': 6 stored item(s) of 2 tenant(s) ('acme', 'globex')" in through_owner.msg
    assert (
        "tulip_memory_reembed --database default --tenant acme --tenant globex " in through_app.hint
    )
