"""DjangoStore on its own: tenants, whole-batch validation, round trips, configuration.

What LangGraph's stores share is in ``test_store_contract.py``; here is what only a
tenant-isolated store on PostgreSQL has. Everything runs on the embedded PostgreSQL as
the application role (row-level security on).
"""

from __future__ import annotations

from typing import TypedDict

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.langgraph import DjangoSaver, DjangoStore
from tulip_memory.store import PgMemory
from tulip_memory.tenancy import tenant_context

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stores():
    made: list[DjangoStore] = []

    def build(**options) -> DjangoStore:
        made.append(DjangoStore(**options))
        return made[-1]

    yield build
    for store in made:
        store.close()


async def test_two_tenants_with_the_same_namespace_see_only_their_own_items(stores):
    acme, globex = stores(tenant="acme"), stores(tenant="globex")
    await acme.aput(("memories", "u1"), "diet", {"text": "vegetarian, loves tofu"})
    await globex.aput(("memories", "u1"), "diet", {"text": "eats fish on fridays"})
    await globex.aput(("memories", "u2"), "pet", {"text": "a cat called tofu"})

    assert (await acme.aget(("memories", "u1"), "diet")).value["text"].startswith("vegetarian")
    assert (await globex.aget(("memories", "u1"), "diet")).value["text"].startswith("eats")
    assert await acme.aget(("memories", "u2"), "pet") is None
    assert [i.key for i in await acme.asearch(("memories",), query="tofu")] == ["diet"]
    assert [i.namespace for i in await acme.asearch(())] == [("memories", "u1")]
    assert await acme.alist_namespaces() == [("memories", "u1")]
    assert await globex.alist_namespaces() == [("memories", "u1"), ("memories", "u2")]

    # The rows are PgMemory's, under the tenant and the store's own label.
    with tenant_context("globex"):
        assert await PgMemory().list_namespaces(("globex",)) == [
            ("globex", "langgraph", "memories", "u1"),
            ("globex", "langgraph", "memories", "u2"),
        ]
    # A tenant deleting "its" key leaves the other's alone.
    await acme.adelete(("memories", "u1"), "diet")
    assert await acme.aget(("memories", "u1"), "diet") is None
    assert await globex.aget(("memories", "u1"), "diet") is not None


async def test_the_graph_s_namespaces_never_meet_the_memory_manager_s(stores):
    from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType

    store = stores(tenant="acme")
    manager = LLMMemoryManager(PgMemory(), namespace_prefix=("acme", "users", "ada"))
    with tenant_context("acme"):
        await manager.save([Memory(MemoryType.USER, "location", "Ada lives in Berlin.")])
        await manager.save([Memory(MemoryType.USER, "location", "Ada lives in Paris.")])
    # The namespace docs/langgraph.md suggests, for the same user.
    await store.aput(("users", "ada", "memories"), "m1", {"text": "Ada lives in Paris."})

    for query in (None, "Ada lives in Paris"):
        found = await store.asearch(("users",), query=query)
        assert [(i.namespace, i.key, i.value) for i in found] == [
            (("users", "ada", "memories"), "m1", {"text": "Ada lives in Paris."})
        ]
    assert await store.alist_namespaces() == [("users", "ada", "memories")]
    assert await store.aget(("users", "ada", "user"), "location") is None
    with tenant_context("acme"):
        assert [m.content for m in await manager.retrieve()] == ["Ada lives in Paris."]
        assert len(await manager.history(MemoryType.USER, "location")) == 2


async def test_shared_root_reads_and_writes_right_under_the_tenant(stores):
    with tenant_context("acme"):
        await PgMemory().put(("acme", "memories", "u1"), "diet", {"text": "vegetarian"})
    shared = stores(tenant="acme", shared_root=True)
    assert (await shared.aget(("memories", "u1"), "diet")).value == {"text": "vegetarian"}
    assert [i.key for i in await shared.asearch(("memories",), query="vegetarian")] == ["diet"]
    await shared.aput(("memories", "u1"), "pet", {"text": "a cat"})
    with tenant_context("acme"):
        assert await PgMemory().list_keys(("acme", "memories", "u1")) == ["pet", "diet"]
    new = stores(tenant="acme")
    assert await new.aget(("memories", "u1"), "diet") is None
    # The move docs/langgraph.md shows for items stored right under the tenant.
    for namespace in await shared.alist_namespaces(prefix=("memories",), suffix=("u1",)):
        while items := await shared.asearch(namespace, limit=1000):
            for item in items:
                await new.aput(item.namespace, item.key, item.value)
                await shared.adelete(item.namespace, item.key)
    assert (await new.aget(("memories", "u1"), "diet")).value == {"text": "vegetarian"}
    assert sorted(i.key for i in await new.asearch(())) == ["diet", "pet"]
    assert await shared.asearch(("memories",)) == []
    assert "shared_root=True" in repr(shared)
    with pytest.raises(ValueError, match="shared_root must be a bool"):
        DjangoStore(shared_root="yes")


async def test_a_query_matching_nothing_lists_the_items_where_pg_memory_finds_none(stores):
    store = stores(tenant="acme")
    for key, text in (("a", "the cat sat"), ("b", "a dog barked"), ("c", "green tea")):
        await store.aput(("notes",), key, {"text": text})
    found = await store.asearch(("notes",), query="qwertyuiop")
    assert sorted(i.key for i in found) == ["a", "b", "c"]  # LangGraph's contract
    with tenant_context("acme"):
        # The same rows through PgMemory (HRR vectors): only word matches.
        assert await PgMemory().search(("acme", "langgraph", "notes"), "qwertyuiop") == []


def test_the_tenant_is_the_bound_one_never_a_namespace_label(stores):
    store = stores()
    with pytest.raises(TenantError, match="no tenant"):
        store.put(("acme", "x"), "k", {"a": 1})
    with tenant_context("acme"):
        store.put(("globex", "x"), "k", {"a": 1})  # "globex" is a label of acme's namespace
    with tenant_context("globex"):
        assert store.get(("globex", "x"), "k") is None
        assert store.list_namespaces() == []
    with tenant_context("acme"):
        assert store.get(("globex", "x"), "k").value == {"a": 1}
        assert store.list_namespaces() == [("globex", "x")]
    fixed = stores(tenant="acme")
    with tenant_context("globex"), pytest.raises(TenantError, match="fixed to tenant"):
        fixed.get(("globex", "x"), "k")


async def test_a_bad_operation_anywhere_in_a_batch_writes_nothing(stores):
    store = stores(tenant="acme")
    await store.aput(("ns",), "kept", {"v": 1})
    bad_batches = [
        ([PutOp(("ns",), "a", {"v": 2}), PutOp(("ns",), "b", "not a mapping")], ValueError),
        ([PutOp(("ns",), "a", {"v": 2}), PutOp(("ns",), "b", {"x": float("nan")})], ValueError),
        ([PutOp(("ns",), "a", {"v": 2}), PutOp(("n.s",), "b", {"v": 3})], InvalidNamespaceError),
        ([PutOp(("ns",), "a", {"v": 2}), PutOp((), "b", {"v": 3})], InvalidNamespaceError),
        ([PutOp(("ns",), "kept", None), PutOp(("ns",), "b", {"v": 3}, ttl=-5)], ValueError),
        ([PutOp(("ns",), "kept", None), SearchOp(("ns",), filter={"v": {"$x": 1}})], ValueError),
        ([PutOp(("ns",), "kept", None), SearchOp(("ns",), limit=-1)], ValueError),
        ([PutOp(("ns",), "kept", None), GetOp(("ns",), "")], ValueError),
        ([PutOp(("ns",), "a", {"v": 2}), PutOp(("ns",), "b", {"v": 3}, index="text")], ValueError),
        ([PutOp(("ns",), "kept", None), "not an op"], ValueError),
        ([PutOp(("ns",), "a", {"v": 2}), PutOp(("ns", " "), "b", {"v": 3})], ValueError),
    ]
    for ops, error in bad_batches:
        with pytest.raises(error):
            await store.abatch(ops)
        with pytest.raises(error):
            store.batch(ops)
    assert [i.key for i in await store.asearch(("ns",))] == ["kept"]
    assert (await store.aget(("ns",), "kept")).value == {"v": 1}


async def test_a_key_that_is_not_text_is_refused_not_turned_into_text(stores):
    """LangGraph's own stores write ``str(key)``: ``put(ns, 1, ...)`` would silently be the
    item ``"1"``. DjangoStore refuses it in every item method, and in a batch."""
    store = stores(tenant="acme")
    await store.aput(("ns",), "1", {"v": 1})
    calls = [
        lambda: store.put(("ns",), 1, {"v": 2}),
        lambda: store.get(("ns",), 1),
        lambda: store.delete(("ns",), 1),
        lambda: async_to_sync(store.aput)(("ns",), 1, {"v": 2}),
        lambda: async_to_sync(store.aget)(("ns",), 1),
        lambda: async_to_sync(store.adelete)(("ns",), 1),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"key must be a str, got int 1; .*str\(key\)"):
            await sync_to_async(call)()
    for ops in ([PutOp(("ns",), 1, {"v": 2})], [PutOp(("ns",), 1, None)], [GetOp(("ns",), 1)]):
        with pytest.raises(ValueError, match="key must be a str, got int"):
            await store.abatch(ops)
    assert (await store.aget(("ns",), "1")).value == {"v": 1}  # nothing written or deleted


LONE = "a\ud800b"  # a lone surrogate: UTF-8 cannot encode it
UNICODE = "must be valid Unicode"


@pytest.mark.parametrize("api", ["sync", "async"])
async def test_text_postgresql_cannot_hold_is_refused_naming_the_argument(stores, api):
    """Every text argument of every method goes through the stores' validation: a NUL or a
    lone surrogate is a ValueError naming it (it was psycopg's DataError or a
    UnicodeEncodeError), and a value whose keys JSON writes as one key is refused (it was
    stored with one entry lost)."""
    store = stores(tenant="acme")
    await store.aput(("ns",), "kept", {"1": "kept"})
    calls = [
        ("get", (("ns", LONE), "k"), {}, rf"^namespace\[1\] {UNICODE}"),
        ("get", (("ns", "a\x00"), "k"), {}, r"^Invalid namespace label 'a\x00'"),  # LangGraph's
        ("put", (("ns", LONE), "k", {"v": 1}), {}, rf"^namespace\[1\] {UNICODE}"),
        ("delete", ((LONE,), "kept"), {}, rf"^namespace\[0\] {UNICODE}"),
        ("search", (("ns", LONE),), {}, rf"^namespace_prefix\[1\] {UNICODE}"),
        ("search", (("ns",),), {"query": LONE}, rf"^query {UNICODE}"),
        ("search", (("ns",),), {"filter": {"a\x00": 1}}, r"^filter must not contain a NUL"),
        ("search", (("ns",),), {"filter": {LONE: 1}}, rf"^filter {UNICODE}"),
        ("search", (("ns",),), {"filter": {"v": {"$ne": LONE}}}, rf"^filter value {UNICODE}"),
        ("list_namespaces", (), {"prefix": ("ns", LONE)}, rf"^prefix\[1\] {UNICODE}"),
        ("list_namespaces", (), {"suffix": (LONE,)}, rf"^suffix\[0\] {UNICODE}"),
        ("put", (("ns",), "kept", {1: "a", "1": "b"}), {}, r"^value has the keys 1 and '1'"),
        ("put", (("ns",), "kept", {"x": {True: 1, "true": 2}}), {}, r"^value\['x'\] has the"),
    ]
    for method, args, kwargs, message in calls:
        with pytest.raises(ValueError, match=message):
            if api == "sync":
                await sync_to_async(getattr(store, method))(*args, **kwargs)
            else:
                await getattr(store, "a" + method)(*args, **kwargs)
    assert await store.alist_namespaces() == [("ns",)]
    assert (await store.aget(("ns",), "kept")).value == {"1": "kept"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("color", "filter must be a dict"),
        ({"n": {"$gt": "3"}}, r"\$gt takes a number"),
        ({"n": {"$lte": True}}, r"\$lte takes a number"),
        ({"n": {"$lt": float("inf")}}, "finite"),
        ({"n": {"$eq": float("nan")}}, "not JSON-serialisable"),
        ({1: "x"}, "filter keys must be strings"),
        ({"n": {"$gt": 1, "plain": 2}}, "Unsupported operator: plain"),
    ],
)
async def test_bad_filters_name_the_problem(stores, spec, message):
    store = stores(tenant="acme")
    await store.aput(("ns",), "k", {"n": 1})
    with pytest.raises(ValueError, match=message):
        await store.asearch(("ns",), filter=spec)


async def test_a_filter_on_a_field_that_is_not_a_number_keeps_nothing(stores):
    store = stores(tenant="acme")
    await store.aput(("ns",), "text", {"n": "12"})
    await store.aput(("ns",), "missing", {"m": 1})
    await store.aput(("ns",), "number", {"n": 12})
    assert [i.key for i in await store.asearch(("ns",), filter={"n": {"$gt": 3}})] == ["number"]


def test_bad_configuration_is_refused(stores):
    with pytest.raises(ValueError, match="pass embedder="):
        DjangoStore(tenant="acme", index={"embed": lambda texts: texts})
    with pytest.raises(ValueError, match="1024 wide"):
        DjangoStore(tenant="acme", index={"dims": 384})
    with pytest.raises(ValueError, match="unknown keys"):
        DjangoStore(tenant="acme", index={"fields": ["text"], "ann_index_config": {}})
    with pytest.raises(ValueError, match="list of field paths"):
        DjangoStore(tenant="acme", index={"fields": "text"})
    with pytest.raises(ConfigurationError, match="needs a postgresql database"):
        DjangoStore("mysql", tenant="acme")
    with pytest.raises(ValueError, match="tenant"):
        DjangoStore(tenant="")
    assert stores(tenant="acme", index={"dims": 1024, "fields": ["text"]}).fields[0][0] == "text"


async def test_indexed_fields_decide_what_a_query_finds(stores):
    store = stores(tenant="acme", index={"fields": ["text"]})
    await store.aput(("ns",), "a", {"text": "alpine lakes", "note": "zebra"})
    await store.aput(("ns",), "b", {"text": "zebra crossing", "note": "alpine"})
    await store.aput(("ns",), "c", {"text": "zebra stripes"}, index=["note"])
    assert (await store.asearch(("ns",), query="alpine"))[0].key == "a"
    assert [i.key for i in await store.asearch(("ns",), query="zebra")][:1] == ["b"]
    # An item stored with index=False has neither words nor vector.
    await store.aput(("ns",), "d", {"text": "alpine alpine"}, index=False)
    assert "d" not in [i.key for i in await store.asearch(("ns",), query="alpine", limit=10)]


def test_a_batch_is_one_transaction_with_one_statement_per_kind(stores):
    store = stores(tenant="acme")
    store.batch([PutOp(("ns", str(i)), f"k{i}", {"text": f"item {i}"}) for i in range(20)])
    ops = [
        *[GetOp(("ns", str(i)), f"k{i}") for i in range(20)],
        SearchOp(("ns",), query="item 3", filter={"text": {"$ne": "x"}}),
        *[PutOp(("ns", str(i)), f"k{i}", {"text": f"new {i}"}) for i in range(20)],
        PutOp(("ns", "0"), "k0", None),
    ]
    with CaptureQueriesContext(connection) as captured:
        # The async API runs its statements on this thread's connection.

        results = async_to_sync(store.abatch)(ops)
    statements = [q["sql"].split()[0].upper() for q in captured.captured_queries]
    # One transaction: the tenant pin, the gets, the search, the delete, the upsert.
    assert statements == ["BEGIN", "SET", "SELECT", "WITH", "DELETE", "INSERT", "COMMIT"]
    assert [r.value for r in results[:3]] == [{"text": f"item {i}"} for i in range(3)]
    assert results[20][0].key == "k3"
    assert store.get(("ns", "0"), "k0") is None
    assert store.get(("ns", "5"), "k5").value == {"text": "new 5"}


class _Turn(TypedDict):
    question: str
    recalled: list[str]


def _build_graph(checkpointer, store, *, sync: bool = False):
    """A graph whose node remembers each question in the store and recalls the nearest."""

    def recalled(state: _Turn, previous: list) -> dict:
        return {"recalled": [*state.get("recalled", []), *[h.value["text"] for h in previous]]}

    async def remember_and_recall(state: _Turn, runtime: Runtime[dict]) -> dict:
        namespace = ("memories", runtime.context["user"])
        previous = await runtime.store.asearch(namespace, query=state["question"], limit=1)
        turn = len(await runtime.store.asearch(namespace, limit=100))
        await runtime.store.aput(namespace, f"q{turn}", {"text": state["question"]})
        return recalled(state, previous)

    def remember_and_recall_sync(state: _Turn, runtime: Runtime[dict]) -> dict:
        namespace = ("memories", runtime.context["user"])
        previous = runtime.store.search(namespace, query=state["question"], limit=1)
        turn = len(runtime.store.search(namespace, limit=100))
        runtime.store.put(namespace, f"q{turn}", {"text": state["question"]})
        return recalled(state, previous)

    builder = StateGraph(_Turn, context_schema=dict)
    builder.add_node(
        "remember_and_recall", remember_and_recall_sync if sync else remember_and_recall
    )
    builder.add_edge(START, "remember_and_recall")
    builder.add_edge("remember_and_recall", END)
    return builder.compile(checkpointer=checkpointer, store=store)


QUESTIONS = [
    "where do penguins live",
    "what is the capital of peru",
    "do penguins fly",
    "how tall is the eiffel tower",
    "which city is the capital of france",
    "is the eiffel tower in paris",
]


async def test_a_graph_compiled_with_the_saver_and_the_store_runs_as_with_langgraph_s(stores):
    ours = _build_graph(DjangoSaver(tenant="acme"), stores(tenant="acme"))
    reference = _build_graph(InMemorySaver(), InMemoryStore())
    for user in ("u1", "u2"):
        config = {"configurable": {"thread_id": f"t-{user}"}}
        for question in QUESTIONS:
            got = await ours.ainvoke({"question": question}, config, context={"user": user})
            want = await reference.ainvoke({"question": question}, config, context={"user": user})
            assert len(got["recalled"]) == len(want["recalled"])
        # InMemoryStore without an index recalls the first memory whatever the question;
        # ours recalls the one sharing the question's words (the 3rd question shares none).
        recalled = got["recalled"]
        assert recalled[:2] == ["where do penguins live", "where do penguins live"]
        assert recalled[3:] == ["what is the capital of peru", "how tall is the eiffel tower"]
    assert sorted(await stores(tenant="acme").alist_namespaces()) == [
        ("memories", "u1"),
        ("memories", "u2"),
    ]


def test_the_sync_api_runs_the_graph_too(stores):
    ours = _build_graph(DjangoSaver(tenant="acme"), stores(tenant="acme"), sync=True)
    config = {"configurable": {"thread_id": "sync"}}
    for question in QUESTIONS:
        state = ours.invoke({"question": question}, config, context={"user": "u1"})
    assert state["recalled"][:2] == ["where do penguins live", "where do penguins live"]
    assert state["recalled"][3:] == ["what is the capital of peru", "how tall is the eiffel tower"]
    assert len(stores(tenant="acme").search(("memories", "u1"), limit=100)) == len(QUESTIONS)


def test_a_celery_style_task_binds_the_tenant_around_an_async_graph(stores):
    # docs/langgraph.md's task: no request, the tenant bound around async_to_sync(ainvoke).

    store = stores()
    graph = _build_graph(DjangoSaver(), store)
    with tenant_context("globex"):
        state = async_to_sync(graph.ainvoke)(
            {"question": "do penguins fly"},
            {"configurable": {"thread_id": "task"}},
            context={"user": "u9"},
        )
        store.put(("follow-ups", "u9"), "task", {"text": "do penguins fly"})
    assert state["recalled"] == []
    assert stores(tenant="globex").list_namespaces() == [("follow-ups", "u9"), ("memories", "u9")]
    assert stores(tenant="acme").list_namespaces() == []
