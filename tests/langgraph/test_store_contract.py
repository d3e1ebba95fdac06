"""One contract for LangGraph stores, run on LangGraph's InMemoryStore and on DjangoStore.

The behaviour comes from LangGraph's own store tests (``libs/checkpoint/tests/test_store.py``
and ``libs/checkpoint-postgres/tests/test_store.py`` of langchain-ai/langgraph), ported
here so that every test runs on both stores: LangGraph's ``InMemoryStore`` is the
reference, ``DjangoStore`` runs on the embedded PostgreSQL as the application role
(row-level security on). A difference shows as a failing pair. Each test runs through
the sync API and through the async one.

Query ranking differs by design (InMemoryStore: the cosine of the vectors alone;
DjangoStore: BM25 fused with the vector's cosine), so a query test asserts only what both
must agree on: the item holding the query's words comes first, filters and pagination
hold. Both stores get the same vectors: HRR bags of words (``tulip_memory.core.hrr``).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from tulip_memory.core import hrr
from tulip_memory.core.text import tokenize
from tulip_memory.langgraph import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

HRR_DIM = 512  # PgMemory's default: the test settings' 1024-wide vector column


def hrr_embed(texts: list[str]) -> list[list[float]]:
    """The vectors PgMemory's HRR encoder gives (zeros for a text without words)."""
    out = []
    for text in texts:
        phases = hrr.encode_tokens(tokenize(text), HRR_DIM)
        out.append([0.0] * 2 * HRR_DIM if phases is None else hrr.phases_to_vector(phases))
    return out


class Api:
    """The store through its sync methods or its async ones (``aput``, ``asearch``...)."""

    def __init__(self, store: Any, mode: str) -> None:
        self.store, self.mode = store, mode

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.mode == "sync":
                return getattr(self.store, name)(*args, **kwargs)
            return await getattr(self.store, "a" + name)(*args, **kwargs)

        return call


def _make(kind: str, fields: list[str] | None = None) -> Any:
    if kind == "memory":
        index: dict[str, Any] = {"dims": 2 * HRR_DIM, "embed": hrr_embed}
        if fields is not None:
            index["fields"] = fields
        return InMemoryStore(index=index)  # type: ignore[arg-type]
    return DjangoStore(tenant="acme", index=None if fields is None else {"fields": fields})


@pytest.fixture(params=["memory", "django"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(kind: str, mode: str) -> Any:
    made = _make(kind)
    yield Api(made, mode)
    if kind == "django":
        made.close()


@pytest.fixture
def make(kind: str, mode: str) -> Any:
    made: list[Any] = []

    def build(fields: list[str] | None = None) -> Api:
        made.append(_make(kind, fields))
        return Api(made[-1], mode)

    yield build
    for one in made:
        if kind == "django":
            one.close()


def keys(items: list[Any]) -> list[str]:
    return [item.key for item in items]


# -- put / get / delete ----------------------------------------------------------------


async def test_basic_store_ops(store: Api) -> None:
    namespace = ("test", "documents")
    value = {"title": "Test Document", "content": "Hello, World!"}
    await store.put(namespace, "doc1", value)
    item = await store.get(namespace, "doc1")
    assert isinstance(item, Item)
    assert (item.namespace, item.key, item.value) == (namespace, "doc1", value)
    assert item.created_at.tzinfo is not None

    updated = {"title": "Updated Document", "content": "Hello, Updated!"}
    await store.put(namespace, "doc1", updated)
    again = await store.get(namespace, "doc1")
    assert again.value == updated
    assert again.updated_at > item.updated_at
    assert await store.get(("test", "other_documents"), "doc1") is None

    await store.delete(namespace, "doc1")
    assert await store.get(namespace, "doc1") is None
    await store.delete(namespace, "never-there")  # deleting nothing is fine


async def test_values_round_trip_as_json(store: Api) -> None:
    value = {"n": 1, "x": 2.5, "ok": True, "none": None, "nested": {"list": [1, "a", {"b": []}]}}
    await store.put(("v",), "k", value)
    assert (await store.get(("v",), "k")).value == value
    # A mapping is stored as a dict (both stores call dict() on it).
    await store.put(("v",), "pairs", [("a", 1)])
    assert (await store.get(("v",), "pairs")).value == {"a": 1}


async def test_namespaces_may_use_langgraph_below_the_root(store: Api) -> None:
    doc = {"foo": "bar"}
    await store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert (await store.get(("foo", "langgraph", "foo"), "bar")).value == doc
    assert (await store.search(("foo", "langgraph", "foo"), query="bar"))[0].value == doc
    await store.delete(("foo", "langgraph", "foo"), "bar")
    assert await store.get(("foo", "langgraph", "foo"), "bar") is None


async def test_non_ascii(store: Api) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, 1):
        await store.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        assert keys(await store.search(("user_123", "memories"), query=text))[0] == str(i)


# -- bad input: the errors LangGraph raises ------------------------------------------------


@pytest.mark.parametrize(
    "namespace",
    [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo"), ("a", 1)],
)
async def test_cannot_put_a_bad_namespace(store: Api, namespace: tuple) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.put(namespace, "foo", {"foo": "bar"})
    assert await store.list_namespaces() == []


@pytest.mark.parametrize(
    ("value", "error"), [("abc", ValueError), (5, TypeError), ([1, 2], TypeError)]
)
async def test_a_value_that_is_not_a_mapping_is_refused(
    store: Api, value: Any, error: type
) -> None:
    with pytest.raises(error):
        await store.put(("ns",), "k", value)
    assert await store.get(("ns",), "k") is None


async def test_bad_labels_in_reads_are_refused(store: Api) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.get(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        await store.search(("a", ""))
    with pytest.raises(InvalidNamespaceError):
        await store.list_namespaces(prefix=("a.b",))
    with pytest.raises(InvalidNamespaceError):
        await store.delete(("a.b",), "k")


async def test_an_unknown_filter_operator_is_refused(store: Api) -> None:
    await store.put(("ns",), "k", {"n": 1})
    with pytest.raises(ValueError, match="Unsupported operator: \\$foo"):
        await store.search(("ns",), filter={"n": {"$foo": 1}})


async def test_ttl_as_the_store_declares_it(store: Api) -> None:
    # The reference (InMemoryStore) has no TTL; DjangoStore's expiry is tested on a manual
    # clock in test_store_ttl.py. Both take ttl=None and refresh_ttl as plain reads.
    if store.store.supports_ttl:
        await store.put(("ns",), "k", {"a": 1}, ttl=5)
        assert (await store.get(("ns",), "k")).value == {"a": 1}
    else:
        with pytest.raises(NotImplementedError, match="TTL is not supported"):
            await store.put(("ns",), "k", {"a": 1}, ttl=5)
        assert await store.get(("ns",), "k") is None
    await store.put(("ns",), "k", {"a": 1}, ttl=None)
    assert (await store.get(("ns",), "k", refresh_ttl=True)).value == {"a": 1}


# -- batches ---------------------------------------------------------------------------------


async def test_batch_order(store: Api) -> None:
    await store.put(("test", "foo"), "key1", {"data": "value1"})
    await store.put(("test", "bar"), "key2", {"data": "value2"})
    results = await store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            # (LangGraph's test reads ("test",) here; InMemoryStore then lists that
            # namespace, empty, as existing: a quirk of its defaultdict, not a behaviour.)
            GetOp(namespace=("test", "foo"), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item)
    assert (results[0].key, results[0].value) == ("key1", {"data": "value1"})
    assert results[1] is None
    assert keys(results[2]) == ["key1"]
    assert results[3] == [("test", "bar"), ("test", "foo")]
    assert results[4] is None

    reordered = await store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert sorted(keys(reordered[0])) == ["key1", "key2"]
    assert reordered[1].value == {"data": "value2"}
    assert reordered[2] == [("test", "bar"), ("test", "foo")]
    assert reordered[3] is None
    assert reordered[4].value == {"data": "value1"}
    assert (await store.get(("test",), "key3")).value == {"data": "value3"}


async def test_a_batch_reads_before_it_writes_and_the_last_write_wins(store: Api) -> None:
    await store.put(("ns",), "k", {"v": "old"})
    results = await store.batch(
        [
            PutOp(("ns",), "k", {"v": "new"}),
            GetOp(("ns",), "k"),
            PutOp(("ns",), "k", {"v": "newest"}),
            PutOp(("ns",), "gone", {"v": 1}),
            PutOp(("ns",), "gone", None),
            SearchOp(("ns",), limit=10),
        ]
    )
    assert results[1].value == {"v": "old"}
    assert [item.value for item in results[5]] == [{"v": "old"}]
    assert (await store.get(("ns",), "k")).value == {"v": "newest"}
    assert await store.get(("ns",), "gone") is None


async def test_batch_get_put_and_search_ops(store: Api) -> None:
    results = await store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    )
    assert results == [None, None, None]
    got = await store.batch(
        [GetOp(("test",), "key1"), GetOp(("test",), "key2"), GetOp(("test",), "key3")]
    )
    assert [None if item is None else item.key for item in got] == ["key1", "key2", None]

    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        await store.put(namespace, key, value)
    found = await store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert sorted(keys(found[0])) == ["key1", "key2"]
    assert len(found[1]) == 2
    assert [(i.namespace, i.key) for i in found[2]] == [(("test", "foo"), "key1")]


async def test_batch_list_namespaces_ops(store: Api) -> None:
    for namespace, key in [
        (("test", "documents", "public"), "doc1"),
        (("test", "documents", "private"), "doc2"),
        (("test", "images", "public"), "img1"),
        (("prod", "documents", "public"), "doc3"),
    ]:
        await store.put(namespace, key, {"content": key})
    results = await store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert results[0] == [
        ("prod", "documents", "public"),
        ("test", "documents", "private"),
        ("test", "documents", "public"),
        ("test", "images", "public"),
    ]
    assert results[1] == [("prod", "documents"), ("test", "documents"), ("test", "images")]
    assert results[2] == [
        ("prod", "documents", "public"),
        ("test", "documents", "public"),
        ("test", "images", "public"),
    ]


# -- list_namespaces -------------------------------------------------------------------------


async def test_list_namespaces_basic(store: Api) -> None:
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    for i, ns in enumerate(namespaces):
        await store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert await store.list_namespaces(prefix=("a", "b")) == ab
    assert await store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await store.list_namespaces(prefix=("a",), suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert await store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await store.list_namespaces(prefix=("a", "b"), limit=2) == ab[:2]
    assert await store.list_namespaces(prefix=("a", "b"), offset=2) == ab[2:]
    assert await store.list_namespaces(prefix=("a", "*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert await store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await store.list_namespaces(prefix=("nonexistent",)) == []
    assert await store.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert await store.list_namespaces() == sorted(namespaces)


async def test_list_namespaces_with_wildcards(store: Api) -> None:
    for i, ns in enumerate(
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ]
    ):
        await store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert await store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert await store.list_namespaces(suffix=("*", "preferences")) == [
        ("guests", "456", "preferences")
    ]
    assert await store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    await store.put(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert await store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


async def test_list_namespaces_pagination_and_max_depth(store: Api) -> None:
    for i in range(20):
        await store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
    for offset in (0, 5, 15):
        assert await store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]
    for i, ns in enumerate(
        [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"), ("h", "i", "j")]
    ):
        await store.put(ns, f"id_{i}", {"data": i})
    assert await store.list_namespaces(max_depth=2, limit=100) == [
        ("a", "b"),
        ("a", "g"),
        ("h", "i"),
        ("namespace", "sub_00"),
        *[("namespace", f"sub_{i:02d}") for i in range(1, 20)],
    ]


async def test_list_namespaces_empty_store(store: Api) -> None:
    assert await store.list_namespaces() == []


async def test_list_namespaces_segment_boundary(store: Api) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
    ]:
        await store.put(namespace, "k", {"v": 1})
    assert await store.list_namespaces(prefix=["foo"], limit=100) == [("foo",), ("foo", "child")]
    assert await store.list_namespaces(suffix=["alice"], limit=100) == [
        ("uid", "a", "b", "alice"),
        ("uid", "users", "alice"),
    ]
    assert await store.list_namespaces(prefix=["uid", "*", "alice"], limit=100) == [
        ("uid", "users", "alice")
    ]
    assert len(await store.list_namespaces(prefix=["uid"], limit=100)) == 3


# -- search without a query: prefixes, filters, pagination ---------------------------------


async def test_search(store: Api) -> None:
    for namespace, key, value in [
        (("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["a"]}),
        (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["b"]}),
        (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["c"]}),
    ]:
        await store.put(namespace, key, value)
    assert len(await store.search(("test",))) == 3
    docs = await store.search(("test", "docs"))
    assert sorted(keys(docs)) == ["doc1", "doc2"]
    assert all(item.namespace == ("test", "docs") for item in docs)
    assert all(item.score is None for item in docs)
    alice = await store.search(("test",), filter={"author": "Alice"})
    assert sorted(keys(alice)) == ["doc1", "img1"]
    assert len(await store.search(("test",), limit=2)) == 2
    assert len(await store.search(("test",), offset=2)) == 1
    assert await store.search(("test",), offset=3) == []
    assert await store.search(("nothing",)) == []


async def test_search_namespace_segment_boundary(store: Api) -> None:
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
    ]:
        await store.put(namespace, "k", {"v": 1})

    async def found(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in await store.search(prefix, limit=100)}

    assert await found(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert await found(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert await found(("foo", "child")) == {("foo", "child"), ("foo", "child", "deep")}
    assert await found(("foo2",)) == {("foo2",)}
    assert await found(("fo",)) == set()
    assert len(await found(())) == 6


async def test_search_namespace_like_metacharacters(store: Api) -> None:
    for namespace in [("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",)]:
        await store.put(namespace, "k", {"v": 1})
    found = {item.namespace for item in await store.search(("user_1",), limit=100)}
    assert found == {("user_1",), ("user_1", "child")}
    assert {item.namespace for item in await store.search(("a%b",))} == {("a%b",)}


async def test_filter_operators(store: Api) -> None:
    docs = {
        "d1": {"color": "red", "score": 4.5, "n": 10, "meta": {"lang": "en", "level": 2}},
        "d2": {"color": "red", "score": 3.0, "n": 9, "meta": {"lang": "fr", "level": 5}},
        "d3": {"color": "green", "score": 4.0, "n": 2, "tags": ["x", "y"]},
        "d4": {"color": "blue", "score": 3.5, "n": 100, "meta": {"lang": "en", "level": 1}},
    }
    for key, value in docs.items():
        await store.put(("f",), key, value)

    async def matching(spec: dict[str, Any]) -> list[str]:
        return sorted(keys(await store.search(("f",), filter=spec, limit=100)))

    assert await matching({"color": "red"}) == ["d1", "d2"]
    assert await matching({"color": {"$eq": "red"}}) == ["d1", "d2"]
    assert await matching({"color": {"$ne": "red"}}) == ["d3", "d4"]
    assert await matching({"score": {"$gt": 3.5}}) == ["d1", "d3"]
    assert await matching({"score": {"$gte": 3.5}}) == ["d1", "d3", "d4"]
    assert await matching({"score": {"$lt": 3.5}}) == ["d2"]
    assert await matching({"score": {"$lte": 3.5}}) == ["d2", "d4"]
    # Numbers compare as numbers, not as text ("9" > "10" as text).
    assert await matching({"n": {"$gt": 9}}) == ["d1", "d4"]
    assert await matching({"score": {"$gte": 3.0, "$lt": 4.5}}) == ["d2", "d3", "d4"]
    assert await matching({"score": {"$gte": 4.0}, "color": "green"}) == ["d3"]
    # Nested objects match field by field; operators apply inside too.
    assert await matching({"meta": {"lang": "en"}}) == ["d1", "d4"]
    assert await matching({"meta": {"level": {"$gt": 3}}}) == ["d2"]
    # A list matches an equal list.
    assert await matching({"tags": ["x", "y"]}) == ["d3"]
    assert await matching({"tags": ["y", "x"]}) == []
    # A missing field equals None.
    assert await matching({"tags": None}) == ["d1", "d2", "d4"]
    assert await matching({"tags": {"$ne": None}}) == ["d3"]
    assert await matching({"nothing": "here"}) == []
    assert await matching({}) == ["d1", "d2", "d3", "d4"]


# -- search with a query ---------------------------------------------------------------------


async def test_vector_insert_with_auto_embedding(store: Api) -> None:
    for key, value in [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]:
        await store.put(("test",), key, value)
    found = await store.search(("test",), query="longer document")
    assert found[0].key == "doc2"
    assert "doc3" in keys(found)
    assert all(item.score is not None for item in found)
    assert [item.score for item in found] == sorted((item.score for item in found), reverse=True)


async def test_vector_update_with_embedding(store: Api) -> None:
    await store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    await store.put(("test",), "doc2", {"text": "something about dogs"})
    await store.put(("test",), "doc3", {"text": "text about birds"})
    initial = await store.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1"

    await store.put(("test",), "doc1", {"text": "new text about dogs"})
    after = await store.search(("test",), query="Zany Xerxes")
    after_score = next(r.score for r in after if r.key == "doc1")
    assert after_score < initial[0].score
    assert (await store.search(("test",), query="new text about dogs"))[0].key == "doc1"

    # Not indexed: a query search with room for three finds the three indexed ones.
    await store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    found = await store.search(("test",), query="new text about dogs", limit=3)
    assert sorted(keys(found)) == ["doc1", "doc2", "doc3"]
    # It is stored all the same.
    assert (await store.get(("test",), "doc4")).value == {"text": "new text about dogs"}
    assert "doc4" in keys(await store.search(("test",)))


@pytest.mark.parametrize("refresh_ttl", [True, False])
async def test_vector_search_with_filters(store: Api, refresh_ttl: bool) -> None:
    for key, value in [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]:
        await store.put(("test",), key, value)
    found = await store.search(
        ("test",), query="apple", filter={"color": "red"}, refresh_ttl=refresh_ttl
    )
    assert keys(found)[0] == "doc1" and len(found) == 2
    found = await store.search(("test",), query="car", filter={"color": "red"})
    assert keys(found)[0] == "doc2" and len(found) == 2
    found = await store.search(("test",), query="blue", filter={"score": {"$gt": 3.2}})
    assert keys(found)[0] == "doc4" and len(found) == 3
    found = await store.search(
        ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
    )
    assert keys(found) == ["doc3"]


async def test_vector_search_pagination(store: Api) -> None:
    for i in range(5):
        await store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = await store.search(("test",), query="test", limit=2)
    page2 = await store.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == len(page2) == 2
    assert not set(keys(page1)) & set(keys(page2))
    assert len(await store.search(("test",), query="test", limit=10)) == 5
    assert (await store.search(("test",), query="number 3"))[0].key == "doc3"


async def test_vector_search_edge_cases(store: Api) -> None:
    await store.put(("test",), "doc1", {"text": "test document"})
    for query in ("", None, "test " * 100, "test!@#$%^&*()"):
        assert len(await store.search(("test",), query=query)) == 1


async def test_vector_search_over_a_prefix_ranks_its_namespaces_together(store: Api) -> None:
    await store.put(("u", "a"), "k1", {"text": "the cat sat on the mat"})
    await store.put(("u", "b"), "k2", {"text": "a dog chased the ball"})
    await store.put(("u", "b", "deep"), "k3", {"text": "penguins swim in cold water"})
    await store.put(("v",), "k4", {"text": "penguins swim in cold water"})
    found = await store.search(("u",), query="penguins swim")
    assert found[0].namespace == ("u", "b", "deep")
    assert sorted(keys(found)) == ["k1", "k2", "k3"]


async def test_a_query_sharing_no_word_with_the_items_still_lists_every_item_with_a_vector(
    store: Api,
) -> None:
    # LangGraph's contract, unlike PgMemory.search: the ranking is by similarity, not a
    # match, so unrelated items come back too, with a low score.
    for key, text in (("a", "the cat sat"), ("b", "a dog barked"), ("c", "green tea")):
        await store.put(("test",), key, {"text": text})
    found = await store.search(("test",), query="qwertyuiop")
    assert sorted(keys(found)) == ["a", "b", "c"]
    assert all(item.score is not None and item.score < 0.1 for item in found)
    assert len(await store.search(("test",), query="qwertyuiop", limit=2)) == 2


async def test_embed_with_path(make: Any) -> None:
    store = make(["key0", "key1", "key3"])
    await store.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})
    await store.put(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
    assert sorted(keys(await store.search(("test",), query="xxx"))) == ["doc1", "doc2"]
    assert keys(await store.search(("test",), query="uuu"))[0] == "doc2"
    assert keys(await store.search(("test",), query="zzz"))[0] == "doc1"

    store = make(["key17"])
    await store.put(
        ("test2",), "doc3", {"key0": "aaa", "key1": "bbb", "key2": "ccc"}, index=["key0", "key1"]
    )
    await store.put(
        ("test2",), "doc4", {"key0": "eee", "key1": "bbb", "key3": "ggg"}, index=["key1", "key3"]
    )
    assert keys(await store.search(("test2",), query="aaa"))[0] == "doc3"
    assert keys(await store.search(("test2",), query="ggg"))[0] == "doc4"
    bbb = await store.search(("test2",), query="bbb")
    assert sorted(keys(bbb)) == ["doc3", "doc4"]
    # Equal words; the HRR vectors of "aaa bbb" and "bbb ggg" differ by a little noise.
    assert bbb[0].score == pytest.approx(bbb[1].score, rel=0.01)
