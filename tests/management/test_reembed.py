"""``manage.py tulip_memory_reembed``: good runs, resumption, idempotence and bad input.

The configured embedder is ``HRREmbedding(dim=512)`` (1024 wide, the column's width) under
another source than the store's own HRR encoding, so a change of embedder is exercised
without a model; ``FlakyEmbedding`` fails on a chosen call to stop a run midway.
"""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.test import override_settings

from tulip_memory.embeddings import HRR, HRREmbedding
from tulip_memory.models.store import MemoryItem
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_atomic

CONFIGURED = {"EMBEDDER": "tulip_memory.embeddings.HRREmbedding", "EMBEDDER_OPTIONS": {"dim": 512}}
CONFIGURED_SOURCE = "embedder:tulip_memory.embeddings.hrr.HRREmbedding"


class FlakyEmbedding(HRREmbedding):
    """An in-process embedder that raises on call number ``fail_at`` (None: never)."""

    model_name = "flaky-hrr"

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(dim=512)
        self.fail_at = fail_at
        self.calls = 0

    async def embed_batch(self, texts):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("the embedding service went away")
        return await super().embed_batch(texts)


def flaky(fail_at):
    return {"EMBEDDER": f"{__name__}.FlakyEmbedding", "EMBEDDER_OPTIONS": {"fail_at": fail_at}}


def reembed(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_reembed", *args, stdout=out, no_color=True)
    return out.getvalue()


def sources(tenant: str) -> dict[str, str]:
    with tenant_atomic(tenant):
        return dict(MemoryItem.objects.values_list("key", "embedding_source"))


@pytest.fixture
def old_rows():
    """Items of three tenants written with HRR, before the embedder changed."""
    store = PgMemory(embedder=HRR)
    for tenant, count in (("acme", 5), ("globex", 2), ("initech", 1)):
        async_to_sync(store.put_batch)(
            [
                ((tenant, "notes"), f"k{i}", {"text": f"note {i} about tea"}, None)
                for i in range(count)
            ]
        )
    async_to_sync(store.put)(("acme", "notes"), "blank", {"text": "?!"})  # no words, no vector


@pytest.mark.django_db
def test_reembeds_the_named_tenants_in_batches_then_has_nothing_left(old_rows):
    with override_settings(TULIP_MEMORY=CONFIGURED):
        output = reembed("--tenant", "acme", "--tenant", "globex", "--batch-size", "2")
        assert "Tenant 'acme': 5 item(s) to re-embed, 0 already" in output
        assert "[############..................] 2/5" in output  # a bar per batch
        assert "[##############################] 5/5" in output
        assert "Re-embedded 7 item(s) in 2 tenant(s)" in output
        assert set(sources("acme").values()) == {CONFIGURED_SOURCE, ""}  # blank: none
        assert set(sources("globex").values()) == {CONFIGURED_SOURCE}
        assert sources("initech") == {"k0": "hrr"}  # not named: untouched
        with tenant_atomic("acme"):
            stored = MemoryItem.objects.get(key="k3").embedding
        [expected] = async_to_sync(HRREmbedding(dim=512).embed_batch)(["note 3 about tea"])
        assert np.allclose(stored, expected, atol=1e-6)
        again = reembed("--tenant", "acme", "--tenant", "globex")  # idempotent
        assert "Re-embedded 0 item(s) in 2 tenant(s)" in again
        assert "7 already carried it" in again


@pytest.mark.django_db
def test_dry_run_counts_and_writes_nothing(old_rows, tmp_path):
    tenants = tmp_path / "tenants.txt"
    tenants.write_text("acme\n# a comment\n\nglobex  # trailing comment\nacme\n")
    with override_settings(TULIP_MEMORY=CONFIGURED):
        output = reembed("--tenants-file", str(tenants), "--dry-run")
    assert "Dry run: 7 item(s) in 2 tenant(s) would be re-embedded" in output
    assert set(sources("acme").values()) == {"hrr", ""}


@pytest.mark.django_db
def test_all_tenants_come_from_the_tenant_registry(old_rows):
    with override_settings(TULIP_MEMORY=CONFIGURED):
        output = reembed("--all-tenants", "--dry-run")
    for line in ("'acme': 5 item(s)", "'globex': 2 item(s)", "'initech': 1 item(s)"):
        assert f"Tenant {line} to re-embed" in output
    assert "Dry run: 8 item(s) in 3 tenant(s)" in output


@pytest.mark.django_db
def test_a_run_that_stops_is_resumed_by_running_it_again(old_rows):
    with override_settings(TULIP_MEMORY=flaky(2)):
        with pytest.raises(CommandError, match=r"Stopped in tenant 'acme'.*went away.*again"):
            reembed("--tenant", "acme", "--batch-size", "2")
        assert list(sources("acme").values()).count("embedder:flaky-hrr") == 2
    with override_settings(TULIP_MEMORY=flaky(None)):
        output = reembed("--tenant", "acme", "--batch-size", "2")
    assert "Tenant 'acme': 3 item(s) to re-embed, 2 already" in output
    assert "Re-embedded 3 item(s)" in output


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "overrides", "message"),
    [
        ((), CONFIGURED, "Name the tenants with --tenant"),
        (("--tenant", " "), CONFIGURED, "Tenant ' ' is not valid"),
        (("--tenant", "a", "--batch-size", "0"), CONFIGURED, "--batch-size must be >= 1"),
        (("--tenants-file", "/nonexistent/t.txt"), CONFIGURED, "cannot be read"),
        (("--tenant", "a", "--database", "nope"), CONFIGURED, "no such alias"),
        (("--tenant", "a", "--database", "mysql"), CONFIGURED, "mysql; this command works on"),
        (
            ("--tenant", "a"),
            {"EMBEDDER": "tulip_memory.nowhere.Embedder"},
            "EMBEDDER'\\] .* cannot be built",
        ),
        (
            ("--tenant", "a"),
            {**CONFIGURED, "EMBEDDER_OPTIONS": {"dim": 64}},
            "128 wide but TULIP_MEMORY\\['VECTOR_DIMENSIONS'\\] is 1024",
        ),
        (
            ("--tenant", "a"),
            {**CONFIGURED, "EMBEDDER_OPTIONS": {"dim": 64}, "VECTOR_DIMENSIONS": 128},
            r"is vector\(1024\).*ALTER TABLE tulip_memory_store_item ALTER COLUMN embedding "
            r"TYPE vector\(128\)",
        ),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(old_rows, args, overrides, message):
    with override_settings(TULIP_MEMORY=overrides), pytest.raises(CommandError, match=message):
        reembed(*args)
    assert set(sources("acme").values()) == {"hrr", ""}


@pytest.mark.django_db
def test_rows_of_the_configured_source_left_without_a_vector_are_reembedded(old_rows):
    """A new column width (``ALTER ... TYPE vector(n) USING NULL``) clears every vector and
    keeps the sources: the rows of the configured source are re-embedded too."""
    with tenant_atomic("acme"):
        MemoryItem.objects.update(embedding=None)  # what the ALTER leaves
    output = reembed("--tenant", "acme")  # no EMBEDDER set: HRR, the rows' own source
    assert "Tenant 'acme': 5 item(s) to re-embed, 0 already" in output
    with tenant_atomic("acme"):
        rows = {item.key: item for item in MemoryItem.objects.all()}
    assert all(rows[f"k{i}"].embedding is not None for i in range(5))
    assert {rows[f"k{i}"].embedding_source for i in range(5)} == {"hrr"}
    assert rows["blank"].embedding is None and rows["blank"].embedding_source == ""
    assert "Re-embedded 0 item(s) in 1 tenant(s)" in reembed("--tenant", "acme")
