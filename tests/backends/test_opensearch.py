"""OpenSearchCheckpointer against the in-process fake (TEST DOUBLE).

UNVERIFIED against a real OpenSearch server: none can run on this machine kind. These
tests pin down the exact requests the checkpointer sends, which are the ones its module
docstring documents and the fake implements.
"""

from __future__ import annotations

import re
import uuid

import pytest

from tests.backends.test_contract import make_state
from tulip_memory.backends import OpenSearchCheckpointer
from tulip_memory.backends.opensearch import MAPPING
from tulip_memory.exceptions import CheckpointError


async def test_only_the_documented_endpoints_are_used(opensearch_fake):
    index = f"ckpt-{uuid.uuid4().hex[:8]}"
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=index)
    start = len(opensearch_fake.requests)
    checkpoint_id = await checkpointer.save(make_state(1), "t")
    await checkpointer.save(make_state(2), "t", "named")
    assert await checkpointer.load("t", checkpoint_id) == make_state(1)
    assert await checkpointer.load("t") == make_state(2)
    assert await checkpointer.list_checkpoints("t") == ["named", checkpoint_id]
    assert await checkpointer.delete("t", "named") is True
    assert await checkpointer.delete("t") is True
    seen = {
        (method, re.sub(r"/_doc/[0-9a-f]{64}$", "/_doc/<id>", path))
        for method, path in opensearch_fake.requests[start:]
    }
    assert seen == {
        ("PUT", f"/{index}-write/_doc/<id>"),
        ("GET", f"/{index}"),
        ("PUT", f"/{index}"),
        ("GET", f"/{index}/_doc/<id>"),
        ("POST", f"/{index}/_search"),
        ("DELETE", f"/{index}/_doc/<id>"),
        ("POST", f"/{index}/_delete_by_query"),
    }
    assert opensearch_fake.mappings[index] == MAPPING["mappings"]
    assert opensearch_fake.aliases[f"{index}-write"] == index


async def test_a_save_costs_one_request_while_the_index_stands(opensearch_fake):
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=f"ckpt-{uuid.uuid4().hex[:8]}")
    await checkpointer.save(make_state(1), "t")
    start = len(opensearch_fake.requests)
    await checkpointer.save(make_state(2), "t")
    assert len(opensearch_fake.requests) == start + 1


@pytest.mark.parametrize("bad", ["", "Upper", None])
def test_index_name_is_validated(bad):
    with pytest.raises(ValueError, match="index must be"):
        OpenSearchCheckpointer("http://127.0.0.1:1", index=bad)


async def test_a_document_holding_no_state_raises_checkpoint_corrupt_error(opensearch_fake):
    from tulip_memory.exceptions import CheckpointCorruptError

    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=f"ckpt-{uuid.uuid4().hex[:8]}")
    await checkpointer.save(make_state(1), "t", "cp")
    checkpointer.client.index(
        index=checkpointer.index,
        id=checkpointer._doc_id("t", "cp"),
        body={"thread_id": "t", "checkpoint_id": "cp", "order": 1, "state": {"bogus": 1}},
        refresh=True,
    )
    for checkpoint_id in (None, "cp"):
        with pytest.raises(CheckpointCorruptError, match=r"^checkpoint 'cp' of thread 't' cannot"):
            await checkpointer.load("t", checkpoint_id)


# -- the index deleted behind the checkpointer's back (by an operator, an ISM policy) ---


def _index_name() -> str:
    return f"ckpt-{uuid.uuid4().hex[:8]}"


async def test_a_save_after_the_index_was_deleted_recreates_it_with_its_mapping(opensearch_fake):
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=_index_name())
    await checkpointer.save(make_state(1), "t", "before")
    checkpointer.client.indices.delete(index=checkpointer.index)

    await checkpointer.save(make_state(2), "t", "after")

    assert opensearch_fake.mappings[checkpointer.index] == MAPPING["mappings"]
    assert opensearch_fake.aliases[checkpointer.write_alias] == checkpointer.index
    assert await checkpointer.list_checkpoints("t") == ["after"]
    assert await checkpointer.load("t") == make_state(2)
    assert await checkpointer.load("t", "before") is None


async def test_reads_and_deletes_of_a_deleted_index_answer_as_for_an_empty_thread(
    opensearch_fake,
):
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=_index_name())
    await checkpointer.save(make_state(1), "t", "cp")
    checkpointer.client.indices.delete(index=checkpointer.index)

    assert await checkpointer.load("t") is None
    assert await checkpointer.load("t", "cp") is None
    assert await checkpointer.list_checkpoints("t") == []
    assert await checkpointer.delete("t", "cp") is False
    assert await checkpointer.delete("t") is False
    assert checkpointer.index not in opensearch_fake.indices  # nothing auto-created

    await checkpointer.save(make_state(2), "t", "cp")
    assert await checkpointer.load("t", "cp") == make_state(2)
    assert opensearch_fake.mappings[checkpointer.index] == MAPPING["mappings"]


async def test_checkpointers_sharing_a_deleted_index_lose_nothing_saved_after_it(
    opensearch_fake,
):
    index = _index_name()
    first = OpenSearchCheckpointer(opensearch_fake.url, index=index)
    second = OpenSearchCheckpointer(opensearch_fake.url, index=index)
    await first.save(make_state(1), "a", "a1")
    await second.save(make_state(1), "b", "b1")
    first.client.indices.delete(index=index)

    await first.save(make_state(2), "a", "a2")  # re-creates the index
    await second.save(make_state(2), "b", "b2")  # writes into it, re-creating nothing
    await first.save(make_state(3), "a", "a3")

    assert opensearch_fake.mappings[index] == MAPPING["mappings"]
    assert await second.list_checkpoints("a") == ["a3", "a2"]
    assert await first.list_checkpoints("b") == ["b2"]
    assert await first.load("b") == make_state(2)


async def test_an_index_auto_created_while_it_was_missing_is_refused_not_written(
    opensearch_fake,
):
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=_index_name())
    await checkpointer.save(make_state(1), "t", "cp")
    checkpointer.client.indices.delete(index=checkpointer.index)
    # a write that does not require the alias (another client, an older version of this
    # class) auto-creates the index with a dynamic mapping
    checkpointer.client.index(
        index=checkpointer.index,
        id=checkpointer._doc_id("other", "x"),
        body={"thread_id": "other", "checkpoint_id": "x", "order": 1, "state": {"v": 1}},
        refresh=True,
    )
    assert opensearch_fake.mappings[checkpointer.index]["properties"]["thread_id"]["type"] == (
        "text"
    )

    with pytest.raises(CheckpointError, match=r"not the checkpointer's \(fields thread_id, "):
        await checkpointer.save(make_state(2), "t", "cp")

    assert checkpointer.write_alias not in opensearch_fake.aliases
    assert list(opensearch_fake.indices[checkpointer.index]) == [checkpointer._doc_id("other", "x")]


async def test_an_index_made_without_the_write_alias_is_adopted_with_its_checkpoints(
    opensearch_fake,
):
    """An index of an earlier version of this class, or restored by an operator."""
    checkpointer = OpenSearchCheckpointer(opensearch_fake.url, index=_index_name())
    checkpointer.client.indices.create(index=checkpointer.index, body=MAPPING)
    checkpointer.client.index(
        index=checkpointer.index,
        id=checkpointer._doc_id("t", "old"),
        body={
            "thread_id": "t",
            "checkpoint_id": "old",
            "order": 1,
            "state": make_state(1).to_checkpoint(),
        },
        refresh=True,
    )

    await checkpointer.save(make_state(2), "t", "new")

    assert opensearch_fake.aliases[checkpointer.write_alias] == checkpointer.index
    assert await checkpointer.list_checkpoints("t") == ["new", "old"]
    assert await checkpointer.load("t", "old") == make_state(1)
