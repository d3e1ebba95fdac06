"""LLMMemoryManager over InMemoryStore: retrieve, save, the memory block, scopes, events."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from tests.manager.conftest import BrokenStore, CountingStore, NonSearchingStore, manager_events
from tulip_memory.events import (
    EV_MEMORY_MANAGER_EXTRACT_FAILED,
    EV_MEMORY_MANAGER_EXTRACTED,
    EV_MEMORY_MANAGER_INJECTED,
)
from tulip_memory.manager import (
    LLMMemoryManager,
    Memory,
    MemoryScope,
    MemoryType,
    NoopMemoryManager,
)
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState
from tulip_memory.store.memory import InMemoryStore

NS = ("acme", "users", "u1")


def _state(*messages: Message, **metadata) -> AgentState:
    return AgentState(messages=list(messages), metadata=metadata)


def _user(text: str) -> Message:
    return Message(Role.USER, text)


def _block_messages(state: AgentState) -> list[Message]:
    return [m for m in state.messages if m.metadata.get("tulip_memory_block")]


# --- retrieve ----------------------------------------------------------------------------


async def test_retrieve_without_query_is_newest_first():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    for i in range(5):
        await manager.save(
            [Memory(MemoryType.PROJECT if i % 2 else MemoryType.USER, f"k{i}", f"fact {i}")]
        )
    got = await manager.retrieve()
    assert [m.key for m in got] == ["k4", "k3", "k2", "k1", "k0"]
    assert [m.key for m in await manager.retrieve(2)] == ["k4", "k3"]
    assert await manager.retrieve(0) == []


async def test_retrieve_with_query_uses_one_ranked_and_one_recency_search_many():
    store = CountingStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save(
        [Memory(t, f"{t.value}-{i}", f"{t.value} fact {i}") for t in MemoryType for i in range(3)]
    )
    store.calls.clear()
    await manager.retrieve(query="postgres deadline")
    assert store.calls == {"search_many": 2}


async def test_a_ranking_that_fills_the_limit_needs_no_recency_search():
    store = CountingStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save(
        [Memory(t, f"{t.value}-{i}", f"{t.value} fact {i}") for t in MemoryType for i in range(3)]
    )
    newest = [m.key for m in await manager.retrieve(12)]
    store.calls.clear()
    # Every memory matches "fact": 5 ranked memories fill the limit, recency is not read.
    five = [m.key for m in await manager.retrieve(5, query="fact")]
    assert store.calls == {"search_many": 1}
    assert len(five) == len(set(five)) == 5
    # 12 ranked memories fill a limit of 12; one more needs the recency top-up, which
    # adds nothing new (every memory is ranked) and repeats none.
    store.calls.clear()
    twelve = [m.key for m in await manager.retrieve(12, query="fact")]
    assert store.calls == {"search_many": 1}
    store.calls.clear()
    thirteen = [m.key for m in await manager.retrieve(13, query="fact")]
    assert store.calls == {"search_many": 2}
    assert thirteen == twelve
    assert sorted(twelve) == sorted(newest)


async def test_rankings_are_merged_rank_by_rank_then_topped_up_by_recency():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    await manager.save(
        [
            Memory(MemoryType.USER, "u-both", "likes kafka and redis"),
            Memory(MemoryType.USER, "u-one", "likes redis"),
            Memory(MemoryType.PROJECT, "p-both", "runs kafka and redis"),
            Memory(MemoryType.PROJECT, "p-none", "deadline in march"),
            Memory(MemoryType.REFERENCE, "r-none", "see the wiki"),
        ]
    )
    got = [m.key for m in await manager.retrieve(query="kafka redis")]
    # Rank 1 of each type (user, project), then rank 2 of user; then the newest others.
    assert got[:3] == ["u-both", "p-both", "u-one"]
    assert got[3:] == ["r-none", "p-none"]
    assert len(got) == len(set(got))  # de-duplicated
    assert [m.key for m in await manager.retrieve(2, query="kafka redis")] == ["u-both", "p-both"]


async def test_an_unreadable_ranked_memory_is_skipped_once_and_the_recency_tops_up(caplog):
    store = CountingStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save(
        [
            Memory(MemoryType.USER, "tea", "drinks green tea"),
            Memory(MemoryType.PROJECT, "plan", "ships in march"),
        ]
    )
    await store.put((*NS, "user"), "broken", {"text": "green tea, no memory fields"})
    store.calls.clear()
    with caplog.at_level(logging.WARNING, logger="tulip_memory.manager"):
        got = [m.key for m in await manager.retrieve(2, query="green tea")]
    # The unreadable item ranks but is skipped; one readable ranked memory does not fill
    # the limit of 2, so the recency search tops it up (the broken item again: skipped).
    assert got == ["tea", "plan"]
    assert store.calls == {"search_many": 2}
    warnings = [r for r in caplog.records if "unreadable memory" in r.getMessage()]
    assert len(warnings) == 1


async def test_query_matching_nothing_still_injects_recent_memories():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    assert [m.key for m in await manager.retrieve(query="zzz qqq")] == ["role"]


async def test_store_without_search_falls_back_to_recency():
    manager = LLMMemoryManager(NonSearchingStore(), namespace_prefix=NS)
    await manager.save(
        [Memory(MemoryType.USER, "a", "first"), Memory(MemoryType.FEEDBACK, "b", "second")]
    )
    assert [m.key for m in await manager.retrieve(query="first")] == ["b", "a"]


async def test_retrieve_over_two_tenants_is_refused():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    with pytest.raises(ValueError, match="tenant"):
        await manager.retrieve(namespaces=[("acme", "u1"), ("globex", "u1")])
    with pytest.raises(ValueError, match="namespaces"):
        await manager.retrieve(namespaces=("acme", "u1"))


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
async def test_retrieve_refuses_a_bad_limit(limit):
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    with pytest.raises(ValueError, match="limit must be an int >= 0"):
        await manager.retrieve(limit)


async def test_retrieve_reads_recall_namespaces_in_priority_order():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    with manager.scoped(("acme", "team")):
        await manager.save([Memory(MemoryType.PROJECT, "stack", "Django")])
    await manager.save([Memory(MemoryType.USER, "role", "nurse")])
    team = ("acme", "team")
    # Both match the query at rank 1 of their namespace: the earlier namespace wins the tie.
    got = await manager.retrieve(query="django nurse", namespaces=[NS, team])
    assert [m.key for m in got] == ["role", "stack"]
    got = await manager.retrieve(query="django nurse", namespaces=[team, NS])
    assert [m.key for m in got] == ["stack", "role"]
    got = await manager.retrieve(1, query="django nurse", namespaces=[team, NS])
    assert [m.key for m in got] == ["stack"]


# --- save ---------------------------------------------------------------------------------


async def test_save_upserts_by_type_and_key_without_mutating_the_callers_memory():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    memory = Memory(MemoryType.USER, "role", "The user is a nurse.", {"source": "test"})
    await manager.save([memory])
    assert memory.metadata == {"source": "test"}
    await manager.save([Memory(MemoryType.USER, "role", "The user is a surgeon.")])
    await manager.save([Memory(MemoryType.FEEDBACK, "role", "Different type, same key.")])
    assert await store.list_keys((*NS, "user")) == ["role"]
    stored = await store.get((*NS, "user"), "role")
    assert stored["content"] == "The user is a surgeon."
    assert "updated_at" in stored["metadata"]
    item = await store.get_item((*NS, "user"), "role")
    assert item.metadata["type"] == "user"
    assert await store.get((*NS, "feedback"), "role") is not None


async def test_save_prunes_each_touched_type_oldest_first():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS, max_memories=3)
    for i in range(5):
        await manager.save([Memory(MemoryType.USER, f"k{i}", f"fact {i}")])
    await manager.save([Memory(MemoryType.PROJECT, "p", "project fact")])
    assert sorted(await store.list_keys((*NS, "user"))) == ["k2", "k3", "k4"]
    # Updating an old one makes it the newest: the next prune drops k3 instead.
    await manager.save(
        [Memory(MemoryType.USER, "k2", "fact 2 again"), Memory(MemoryType.USER, "k5", "f5")]
    )
    assert sorted(await store.list_keys((*NS, "user"))) == ["k2", "k4", "k5"]


async def test_save_refuses_bad_input_and_writes_nothing():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    with pytest.raises(ValueError, match=r"memories\[1\]"):
        await manager.save([Memory(MemoryType.USER, "a", "ok"), {"type": "user"}])
    with pytest.raises(ValueError, match="list"):
        await manager.save(Memory(MemoryType.USER, "a", "ok"))
    emptied = Memory(MemoryType.USER, "b", "ok")
    emptied.content = " "  # a dataclass's fields can be reassigned: save() checks again
    with pytest.raises(ValueError, match=r"memories\[1\]: Memory.content is blank"):
        await manager.save([Memory(MemoryType.USER, "a", "ok"), emptied])
    assert await store.list_namespaces() == []


async def test_a_nul_character_in_the_conversation_is_dropped_before_extraction():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.on_session_end(_state(_user("I live in Ber\x00lin.")))
    (memory,) = await manager.retrieve()
    assert (memory.key, memory.content) == ("location", "The user lives in Berlin.")


@pytest.mark.parametrize("hook", ["on_session_start", "on_session_end"])
@pytest.mark.parametrize("state", [None, {"messages": []}, [Message(Role.USER, "hi")]])
async def test_the_session_hooks_refuse_what_is_not_an_agent_state(hook, state, caplog):
    manager = LLMMemoryManager(InMemoryStore(), namespace_resolver=lambda run: NS)
    with pytest.raises(ValueError, match=rf"{hook}\(\) takes an AgentState, got"):
        await getattr(manager, hook)(state)
    assert "namespace_resolver failed" not in caplog.text


def test_memory_validates_its_fields():
    with pytest.raises(ValueError, match="type"):
        Memory("opinion", "k", "c")
    with pytest.raises(ValueError, match="key"):
        Memory(MemoryType.USER, "  ", "c")
    with pytest.raises(ValueError, match="key"):
        Memory(MemoryType.USER, "k" * 201, "c")
    with pytest.raises(ValueError, match="content"):
        Memory(MemoryType.USER, "k", None)
    for blank in ("", " \n\t"):
        with pytest.raises(ValueError, match=r"Memory\.content is blank"):
            Memory(MemoryType.USER, "k", blank)
    with pytest.raises(ValueError, match=r"Memory\.content must not contain a NUL"):
        Memory(MemoryType.USER, "k", "Ber\x00lin")
    for metadata, problem in (
        ({"x": float("nan")}, "is not JSON-serialisable: Out of range float"),
        ({"x": {1, 2}}, "is not JSON-serialisable: Object of type set"),
        ({"x": ["a\x00"]}, "must not contain a NUL"),
        ({"k\x00": 1}, "must not contain a NUL"),
    ):
        with pytest.raises(ValueError, match=rf"Memory\.metadata {problem}"):
            Memory(MemoryType.USER, "k", "c", metadata)
    assert Memory(MemoryType.USER, "k", "c", {"x": "\\u0000"}).metadata == {"x": "\\u0000"}
    assert Memory("user", "k", "c").type is MemoryType.USER
    memory = Memory(MemoryType.PROJECT, "k", "c", {"x": 1})
    assert Memory.from_store_value(memory.to_store_value()) == memory
    with pytest.raises(ValueError, match="content"):
        Memory.from_store_value({"type": "user", "key": "k"})
    with pytest.raises(ValueError, match="blank"):  # recall skips such a row with a warning
        Memory.from_store_value({"type": "user", "key": "k", "content": ""})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"extract_mode": "later"}, "extract_mode"),
        ({"max_memories": 0}, "max_memories"),
        ({"retrieve_limit": -1}, "retrieve_limit"),
        ({"max_concurrent_extractions": 0}, "max_concurrent_extractions"),
        ({"namespace_prefix": ()}, "namespace_prefix"),
        ({"namespace_prefix": "acme"}, "namespace_prefix"),
        ({"extract_fn": "not callable"}, "extract_fn"),
        ({"namespace_resolver": 3}, "namespace_resolver"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LLMMemoryManager(InMemoryStore(), **kwargs)


def test_constructor_rejects_a_non_store():
    with pytest.raises(ValueError, match="BaseStore"):
        LLMMemoryManager({})


# --- the memory block ----------------------------------------------------------------------


async def test_block_goes_after_leading_system_messages_and_replaces_an_earlier_one(sent_events):
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    state = _state(
        Message(Role.SYSTEM, "You help."), Message(Role.SYSTEM, "Be brief."), _user("hi")
    )
    first = await manager.on_session_start(state)
    assert len(state.messages) == 3  # the caller's state is not modified
    assert [m.role for m in first.messages] == [Role.SYSTEM, Role.SYSTEM, Role.SYSTEM, Role.USER]
    block = first.messages[2]
    assert block.metadata == {"tulip_memory_block": True}
    assert "The user is a nurse." in block.content
    first.messages.append(Message(Role.ASSISTANT, "Hello"))
    first.messages.append(_user("and now?"))
    await manager.save([Memory(MemoryType.PROJECT, "stack", "Project: Django.")])
    second = await manager.on_session_start(first)
    blocks = _block_messages(second)
    assert len(blocks) == 1 and "Project: Django." in blocks[0].content
    assert second.messages.index(blocks[0]) == 2
    assert [e for e, _ in manager_events(sent_events)].count(EV_MEMORY_MANAGER_INJECTED) == 2
    payload = next(p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_INJECTED)
    assert payload["memory_count"] == 1 and payload["types"] == ["user"]


async def test_block_is_removed_when_there_are_no_memories_any_more():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    injected = await manager.on_session_start(_state(_user("hi")))
    assert _block_messages(injected)
    await manager.forget(MemoryType.USER, "role")
    cleaned = await manager.on_session_start(injected)
    assert not _block_messages(cleaned)
    assert [m.content for m in cleaned.messages] == ["hi"]


async def test_latest_user_message_is_the_query():
    store = CountingStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    seen: list[str | None] = []
    original = manager.retrieve

    async def spy(limit=None, *, query=None, namespaces=None):
        seen.append(query)
        return await original(limit, query=query, namespaces=namespaces)

    manager.retrieve = spy
    await manager.on_session_start(
        _state(
            _user("first"),
            Message(Role.ASSISTANT, "ok"),
            _user("second"),
            Message(Role.ASSISTANT, ""),
        )
    )
    assert seen == ["second"]


async def test_session_end_strips_the_block_before_extraction(sent_events):
    seen: list[list[Message]] = []

    async def extractor(messages):
        seen.append(messages)
        return [Memory(MemoryType.USER, "role", "The user is a chef.")]

    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS, extract_fn=extractor)
    await manager.save([Memory(MemoryType.USER, "name", "The user's name is Ada.")])
    state = await manager.on_session_start(_state(_user("I am a chef.")))
    await manager.on_session_end(state)
    assert [m.content for m in seen[0]] == ["I am a chef."]
    extracted = [p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACTED]
    assert extracted == [
        {"memory_count": 1, "types": ["user"], "mode": "inline", "namespace": list(NS)}
    ]


@pytest.mark.parametrize("failure", ["extractor", "store"])
async def test_failing_extractor_or_store_is_logged_and_emitted_never_raised(
    failure, sent_events, caplog
):
    async def broken(messages):
        raise RuntimeError("model unavailable")

    if failure == "extractor":
        manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS, extract_fn=broken)
    else:
        manager = LLMMemoryManager(BrokenStore(), namespace_prefix=NS)
    with caplog.at_level(logging.ERROR, logger="tulip_memory.manager"):
        await manager.on_session_end(_state(_user("I'm a nurse.")))
    failed = [p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACT_FAILED]
    assert len(failed) == 1
    assert failed[0]["error_type"] == (
        "RuntimeError" if failure == "extractor" else "ConnectionError"
    )
    assert "memory extraction failed" in caplog.text


@pytest.mark.parametrize("mode", ["inline", "background"])
@pytest.mark.parametrize("raised", ["LLMError", "RuntimeError"])
async def test_a_failures_event_and_log_never_quote_its_message(mode, raised, sent_events, caplog):
    # A model server's error text or a parse problem may quote the conversation: the
    # event's error and every log record above DEBUG say the type and what failed, in
    # words of ours; the message itself goes to DEBUG only (erasure cannot reach a log
    # aggregator or an event receiver).
    from tulip_memory.exceptions import LLMError

    quoted = "the reply 'Ada lives at Wisteria Lane 4' is not JSON"

    async def broken(messages):
        if raised == "LLMError":
            raise LLMError(quoted, kind="malformed_output")
        raise RuntimeError(quoted)

    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=NS, extract_fn=broken, extract_mode=mode
    )
    with caplog.at_level(logging.DEBUG, logger="tulip_memory"):
        await manager.on_session_end(_state(_user("I live at Wisteria Lane 4.")))
        await manager.drain()
    [failed] = [p for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACT_FAILED]
    what = {"LLMError": "the chat model failed (malformed_output)"}.get(
        raised, "the extraction failed"
    )
    error = f"{raised}: {what}; its message is logged at DEBUG level"
    assert (failed["error"], failed["error_type"], failed["mode"]) == (error, raised, mode)
    assert "Wisteria" not in json.dumps(failed)
    quoting = [r for r in caplog.records if "Wisteria" in logging.Formatter().format(r)]
    assert [r.levelname for r in quoting] == ["DEBUG"]
    assert any(error in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


# --- scopes and resolvers ----------------------------------------------------------------------


async def test_scoped_is_context_local_and_works_as_a_decorator():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=("acme", "shared"))

    async def remember(user: str) -> tuple[str, ...]:
        with manager.scoped(("acme", user)):
            await asyncio.sleep(0.01)
            await manager.save([Memory(MemoryType.USER, "name", f"name of {user}")])
            await asyncio.sleep(0.01)
            return manager.active_namespace

    assert await asyncio.gather(remember("u1"), remember("u2")) == [("acme", "u1"), ("acme", "u2")]
    assert manager.active_namespace == ("acme", "shared")
    for user in ("u1", "u2"):
        with manager.scoped(("acme", user)):
            assert [m.content for m in await manager.retrieve()] == [f"name of {user}"]

    @manager.scoped(("acme", "u1"))
    async def decorated() -> tuple[str, ...]:
        return manager.active_namespace

    assert await decorated() == ("acme", "u1")
    other = LLMMemoryManager(InMemoryStore(), namespace_prefix=("acme", "other"))
    with manager.scoped(("acme", "u1")):
        assert other.active_namespace == ("acme", "other")  # scopes are per manager


async def test_one_scope_binding_entered_by_overlapping_tasks():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=("acme", "shared"))
    binding = manager.scoped(("acme", "u1"))
    entered, release_first = asyncio.Event(), asyncio.Event()

    async def first() -> tuple[str, ...]:
        with binding:
            entered.set()
            await release_first.wait()
            return manager.active_namespace

    async def second() -> tuple[str, ...]:
        await entered.wait()
        with binding:
            release_first.set()
            await asyncio.sleep(0.01)  # first() leaves while second() is still inside
            return manager.active_namespace

    assert await asyncio.gather(first(), second()) == [("acme", "u1"), ("acme", "u1")]
    assert manager.active_namespace == ("acme", "shared")


def test_recall_prefixes_of_another_tenant_are_dropped_with_a_warning(caplog):
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    with (
        caplog.at_level(logging.WARNING),
        manager.scoped(("acme", "u1"), recall=[("acme", "team"), ("globex", "team")]),
    ):
        assert manager.active_recall == (("acme", "u1"), ("acme", "team"))
    assert "another tenant" in caplog.text
    assert manager.active_recall == (NS,)


async def test_resolver_none_or_failing_means_no_memory_at_all():
    store = CountingStore()

    def resolver(run):
        if run.metadata.get("user") == "boom":
            raise KeyError("user")
        return None if run.metadata.get("user") is None else ("acme", run.metadata["user"])

    manager = LLMMemoryManager(
        store, namespace_prefix=("acme", "shared"), namespace_resolver=resolver
    )
    await LLMMemoryManager(store, namespace_prefix=("acme", "shared")).save(
        [Memory(MemoryType.USER, "k", "shared fact")]
    )
    old_block = Message(Role.SYSTEM, "stale", metadata={"tulip_memory_block": True})
    for metadata in ({}, {"user": "boom"}):
        store.calls.clear()
        state = AgentState(messages=[old_block, _user("I'm a nurse.")], metadata=metadata)
        started = await manager.on_session_start(state)
        assert not _block_messages(started)
        await manager.on_session_end(state)
        assert store.calls == {}  # neither read nor written
    await manager.on_session_end(_state(_user("I'm a nurse."), user="u7"))
    with manager.scoped(("acme", "u7")):
        assert [m.key for m in await manager.retrieve()] == ["role"]


async def test_memory_scope_adds_read_only_recall_namespaces():
    store = InMemoryStore()
    team = LLMMemoryManager(store, namespace_prefix=("acme", "team"))
    await team.save([Memory(MemoryType.PROJECT, "stack", "Project: Django.")])
    manager = LLMMemoryManager(
        store,
        namespace_prefix=("acme", "shared"),
        namespace_resolver=lambda run: MemoryScope(
            ("acme", run.metadata["user"]), recall=(("acme", "team"),)
        ),
    )
    started = await manager.on_session_start(_state(_user("I'm a chef."), user="u1"))
    assert "Project: Django." in _block_messages(started)[0].content
    await manager.on_session_end(started)
    assert await store.list_keys(("acme", "team", "project")) == ["stack"]
    assert await store.list_keys(("acme", "team", "user")) == []
    assert await store.list_keys(("acme", "u1", "user")) == ["role"]


def test_memory_scope_validates():
    with pytest.raises(ValueError, match="namespace"):
        MemoryScope(())
    with pytest.raises(ValueError, match="recall"):
        MemoryScope(("acme",), recall="team")
    assert MemoryScope(["acme", "u1"]).namespace == ("acme", "u1")


# --- background mode -----------------------------------------------------------------------------


async def test_background_jobs_of_a_namespace_run_in_order_bounded_and_drained():
    log: dict[str, list[int]] = {}
    running = 0
    peak = 0

    async def extractor(messages):
        nonlocal running, peak
        user, number = messages[-1].content.split()
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.002 * (7 - int(number) % 7))  # later jobs are faster
        running -= 1
        log.setdefault(user, []).append(int(number))
        return []

    manager = LLMMemoryManager(
        InMemoryStore(),
        namespace_prefix=("acme", "shared"),
        extract_fn=extractor,
        extract_mode="background",
        max_concurrent_extractions=2,
        namespace_resolver=lambda run: ("acme", run.metadata["user"]),
    )
    for number in range(8):
        for user in ("u1", "u2", "u3"):
            await manager.on_session_end(_state(_user(f"{user} {number}"), user=user))
    assert manager.pending_extractions == 24
    assert log == {}  # nothing ran in the caller

    async def submit_while_draining():
        await asyncio.sleep(0.01)
        await manager.on_session_end(_state(_user("u1 8"), user="u1"))

    await asyncio.gather(manager.drain(), submit_while_draining())
    assert manager.pending_extractions == 0
    assert log == {"u1": list(range(9)), "u2": list(range(8)), "u3": list(range(8))}
    assert peak == 2


async def test_background_failures_are_emitted_not_raised(sent_events):
    async def broken(messages):
        raise RuntimeError("nope")

    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=NS, extract_fn=broken, extract_mode="background"
    )
    await manager.on_session_end(_state(_user("hi")))
    await manager.drain()
    assert [
        p["mode"] for e, p in manager_events(sent_events) if e == EV_MEMORY_MANAGER_EXTRACT_FAILED
    ] == ["background"]


async def test_drain_in_inline_mode_returns_at_once_and_noop_manager_remembers_nothing():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    await manager.drain()
    noop = NoopMemoryManager()
    state = _state(_user("I'm a nurse."))
    assert await noop.on_session_start(state) is state
    await noop.on_session_end(state)
    assert await noop.retrieve() == [] and noop.pending_extractions == 0
    await noop.drain()


async def test_history_and_forget_validate_their_arguments():
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=NS)
    with pytest.raises(ValueError, match="type"):
        await manager.history("opinion", "k")
    with pytest.raises(ValueError, match="key"):
        await manager.forget(MemoryType.USER, "")


def test_background_manager_works_under_successive_event_loops():
    seen: list[str] = []

    async def extractor(messages):
        await asyncio.sleep(0)
        seen.append(messages[-1].content)
        return []

    manager = LLMMemoryManager(
        InMemoryStore(), namespace_prefix=NS, extract_fn=extractor, extract_mode="background"
    )

    async def one_request(text: str) -> None:
        await manager.on_session_end(_state(_user(text)))
        await manager.drain()

    asyncio.run(one_request("first loop"))
    asyncio.run(one_request("second loop"))
    assert seen == ["first loop", "second loop"]


async def test_save_writes_one_batch_and_the_last_memory_of_a_key_wins():
    store = CountingStore()
    manager = LLMMemoryManager(store, namespace_prefix=NS)
    await manager.save(
        [
            Memory(MemoryType.USER, "role", "nurse"),
            Memory(MemoryType.PROJECT, "db", "postgres"),
            Memory(MemoryType.USER, "role", "surgeon"),
        ]
    )
    # One batch, written only if the memories it replaces are still current (history).
    assert store.calls == {"compare_and_put_batch": 1}
    assert [m.content for m in await manager.retrieve()] == ["surgeon", "postgres"]
    assert [v.content for v in await manager.history(MemoryType.USER, "role")] == ["surgeon"]
