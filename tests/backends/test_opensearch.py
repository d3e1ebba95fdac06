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
        ("HEAD", f"/{index}"),
        ("PUT", f"/{index}"),
        ("PUT", f"/{index}/_doc/<id>"),
        ("GET", f"/{index}/_doc/<id>"),
        ("POST", f"/{index}/_search"),
        ("DELETE", f"/{index}/_doc/<id>"),
        ("POST", f"/{index}/_delete_by_query"),
    }
    assert opensearch_fake.mappings[index]["dynamic"] == "strict"


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
