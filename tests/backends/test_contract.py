"""The BaseCheckpointer contract, run over every backend of ``conftest.BACKENDS``."""

from __future__ import annotations

import asyncio

import pytest

from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.state import AgentState


def make_state(turns: int, *, tag: str = "") -> AgentState:
    messages = [Message(Role.SYSTEM, "You are a careful gardener.")]
    for turn in range(turns):
        messages.append(Message(Role.USER, f"{tag}question {turn}: when do tulips bloom? é✓"))
        messages.append(
            Message(
                Role.ASSISTANT,
                f"{tag}answer {turn}",
                tool_calls=[
                    ToolCall(id=f"c{turn}", name="lookup", arguments={"q": [turn, {"x": None}]})
                ],
                metadata={"tokens": turn * 3, "nested": {"ok": True}},
            )
        )
    return AgentState(
        messages=messages, metadata={"turn": turns, "user": {"id": 7}}, thread_id="th"
    )


async def test_round_trip_is_equal(checkpointer):
    state = make_state(3)
    checkpoint_id = await checkpointer.save(state, "thread-1")
    assert isinstance(checkpoint_id, str) and checkpoint_id
    assert await checkpointer.load("thread-1", checkpoint_id) == state
    assert await checkpointer.load("thread-1") == state


async def test_loaded_state_is_a_copy(checkpointer):
    state = make_state(1)
    await checkpointer.save(state, "t")
    loaded = await checkpointer.load("t")
    loaded.messages[2].metadata["nested"]["ok"] = False
    loaded.metadata["user"]["id"] = 8
    state.messages.append(Message(Role.USER, "not saved"))
    again = await checkpointer.load("t")
    assert again == make_state(1)


async def test_latest_and_specific_checkpoints(checkpointer):
    ids = [await checkpointer.save(make_state(n), "t") for n in range(4)]
    assert len(set(ids)) == 4
    assert await checkpointer.load("t") == make_state(3)
    for n, checkpoint_id in enumerate(ids):
        assert await checkpointer.load("t", checkpoint_id) == make_state(n)


async def test_list_newest_first_with_limit(checkpointer):
    ids = [await checkpointer.save(make_state(n), "t") for n in range(5)]
    assert await checkpointer.list_checkpoints("t") == ids[::-1]
    assert await checkpointer.list_checkpoints("t", limit=2) == ids[:-3:-1]
    assert await checkpointer.list_checkpoints("other") == []


@pytest.mark.parametrize("limit", [2**63, 2**100])
async def test_limits_beyond_any_database_integer_mean_everything(checkpointer, limit):
    ids = [await checkpointer.save(make_state(i), "huge-limit") for i in range(3)]
    assert await checkpointer.list_checkpoints("huge-limit", limit=limit) == ids[::-1]


async def test_explicit_ids_and_replacing_one(checkpointer):
    await checkpointer.save(make_state(1), "t", "first")
    await checkpointer.save(make_state(2), "t", "second")
    assert await checkpointer.save(make_state(5, tag="v2 "), "t", "first") == "first"
    assert await checkpointer.list_checkpoints("t") == ["first", "second"]
    assert await checkpointer.load("t", "first") == make_state(5, tag="v2 ")
    assert await checkpointer.load("t", "second") == make_state(2)
    assert await checkpointer.load("t") == make_state(5, tag="v2 ")


async def test_delete_one_and_all(checkpointer):
    ids = [await checkpointer.save(make_state(n), "t") for n in range(4)]
    await checkpointer.save(make_state(9), "other")
    assert await checkpointer.delete("t", ids[1]) is True
    assert await checkpointer.delete("t", ids[1]) is False
    assert await checkpointer.load("t", ids[1]) is None
    assert await checkpointer.list_checkpoints("t") == [ids[3], ids[2], ids[0]]
    for n in (0, 2, 3):
        assert await checkpointer.load("t", ids[n]) == make_state(n)
    assert await checkpointer.delete("t", ids[3]) is True
    assert await checkpointer.load("t") == make_state(2)
    assert await checkpointer.delete("t") is True
    assert await checkpointer.list_checkpoints("t") == []
    assert await checkpointer.load("t") is None
    assert await checkpointer.delete("t") is False
    assert await checkpointer.load("other") == make_state(9)


async def test_unknown_thread_or_checkpoint_gives_none(checkpointer):
    assert await checkpointer.load("nobody") is None
    assert await checkpointer.load("nobody", "nothing") is None
    await checkpointer.save(make_state(1), "t")
    assert await checkpointer.load("t", "nothing") is None
    assert await checkpointer.delete("t", "nothing") is False


async def test_threads_are_separate_even_with_awkward_ids(checkpointer):
    threads = ["a", "a:index", "a/b", "../x", "/etc/passwd", "a b.c", "ü✓", "x" * 255]
    for n, thread_id in enumerate(threads):
        await checkpointer.save(make_state(n), thread_id, f"id/{n}:.. ü")
    for n, thread_id in enumerate(threads):
        assert await checkpointer.load(thread_id) == make_state(n)
        assert await checkpointer.list_checkpoints(thread_id) == [f"id/{n}:.. ü"]


async def test_ids_differing_only_in_case_width_or_trailing_space_are_distinct(checkpointer):
    variants = ["t1", "T1", "t1 ", "\uff54\uff11"]  # the last is full-width "t1"
    for n, thread_id in enumerate(variants):
        await checkpointer.save(make_state(n), thread_id, "cp")
        await checkpointer.save(make_state(n, tag="other "), "ids", thread_id)
    for n, thread_id in enumerate(variants):
        assert await checkpointer.load(thread_id) == make_state(n)
        assert await checkpointer.list_checkpoints(thread_id) == ["cp"]
        assert await checkpointer.load("ids", thread_id) == make_state(n, tag="other ")
    assert sorted(await checkpointer.list_checkpoints("ids")) == sorted(variants)
    assert await checkpointer.delete("T1") is True
    assert await checkpointer.load("t1") == make_state(0)
    assert await checkpointer.delete("ids", "t1 ") is True
    assert await checkpointer.load("ids", "t1") == make_state(0, tag="other ")


async def test_concurrent_saves_to_one_thread_keep_every_checkpoint(checkpointer):
    states = [make_state(n % 4, tag=f"{n} ") for n in range(20)]
    ids = await asyncio.gather(*(checkpointer.save(s, "busy") for s in states))
    assert len(set(ids)) == 20
    assert sorted(await checkpointer.list_checkpoints("busy", limit=100)) == sorted(ids)
    for state, checkpoint_id in zip(states, ids, strict=True):
        assert await checkpointer.load("busy", checkpoint_id) == state


def _typed(value):
    """``value`` with the type of every scalar beside it: equal only when the types are too
    (``True == 1 == 1.0``, but not once typed)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, value)


def _readers(checkpointer):
    """The checkpointer, and for a DeltaCheckpointer one without a cache over its storage
    (what another process reads)."""
    from tulip_memory.delta import DeltaCheckpointer

    if isinstance(checkpointer, DeltaCheckpointer):
        return [checkpointer, DeltaCheckpointer(checkpointer.storage, cache_size=0)]
    return [checkpointer]


async def test_values_equal_in_python_but_of_another_type_are_changes(checkpointer):
    """0 -> False -> 1 -> True -> 1.0 -> 0.0 -> 0: each save changes only the type of the
    values (metadata, nested, a tool call's arguments, a message's metadata); every one
    loads back with its own types."""
    saved = []
    for value in (0, False, 1, True, 1.0, 0.0, 0):
        state = AgentState(
            messages=[
                Message(Role.USER, "flag it"),
                Message(
                    Role.ASSISTANT,
                    "",
                    tool_calls=[ToolCall("c1", "set_flag", {"flag": value, "all": [value]})],
                    metadata={"flag": value},
                ),
            ],
            metadata={"flag": value, "nested": {"flags": [value, {"flag": value}]}},
        )
        saved.append((await checkpointer.save(state, "types"), state))
    for reader in _readers(checkpointer):
        for checkpoint_id, state in saved:
            loaded = await reader.load("types", checkpoint_id)
            assert _typed(loaded.to_checkpoint()) == _typed(state.to_checkpoint())
        newest = await reader.load("types")
        assert _typed(newest.to_checkpoint()) == _typed(saved[-1][1].to_checkpoint())


async def test_a_state_that_cannot_be_stored_leaves_the_checkpoint_it_would_replace(
    checkpointer,
):
    import threading

    await checkpointer.save(make_state(1), "t", "first")
    await checkpointer.save(make_state(2), "t", "second")
    unstorable = make_state(3)
    unstorable.metadata["lock"] = threading.Lock()  # neither JSON nor copyable
    for checkpoint_id in ("first", "second", None):
        with pytest.raises(ValueError, match=r"^state\.metadata\.lock is not JSON-serialisable"):
            await checkpointer.save(unstorable, "t", checkpoint_id)
    assert await checkpointer.list_checkpoints("t") == ["second", "first"]
    for reader in _readers(checkpointer):
        assert await reader.load("t", "first") == make_state(1)
        assert await reader.load("t", "second") == make_state(2)


def _states_json_cannot_hold() -> list[tuple[AgentState, str]]:
    """(state, the start of the ValueError saving it raises): a value JSON cannot hold in
    each part of a state that is the caller's, and a state JSON cannot nest."""
    import datetime
    import decimal

    circular: dict[str, object] = {}
    circular["again"] = circular
    deep: list[object] = []
    for _ in range(10_000):
        deep = [deep]
    answer = Message(Role.TOOL, "42", tool_call_id="c1")
    answer.tool_call_id = b"c1"  # type: ignore[assignment]  # set after it was built
    holds = "is not JSON-serialisable: it is of type"
    return [
        (AgentState(metadata={"tags": {"a", "b"}}), f"state.metadata.tags {holds} set,"),
        (AgentState(metadata={"a b": [1, b"raw"]}), f"state.metadata['a b'][1] {holds} bytes,"),
        (
            AgentState(metadata={"at": {"when": datetime.datetime(2024, 5, 1)}}),
            f"state.metadata.at.when {holds} datetime.datetime,",
        ),
        (AgentState(metadata={(1, 2): "pair"}), f"state.metadata[(1, 2)] (the key) {holds} tuple,"),
        (
            AgentState(
                messages=[
                    Message(Role.USER, "how much?"),
                    Message(
                        Role.ASSISTANT,
                        "",
                        tool_calls=[ToolCall("c1", "price", {"eur": decimal.Decimal("2.5")})],
                    ),
                ]
            ),
            f"state.messages[1].tool_calls[0].arguments.eur {holds} decimal.Decimal,",
        ),
        (
            AgentState(messages=[Message(Role.USER, "hi", metadata={"seen": frozenset()})]),
            f"state.messages[0].metadata.seen {holds} frozenset,",
        ),
        (AgentState(messages=[answer]), f"state.messages[0].tool_call_id {holds} bytes,"),
        (
            AgentState(metadata={"loop": circular}),
            "state is not JSON-serialisable: Circular reference",
        ),
        (AgentState(metadata={"deep": deep}), "state is nested too deeply to be stored as JSON"),
    ]


async def _assert_refused_leaving_the_thread(
    checkpointer, refused_states: list[tuple[AgentState, str]]
) -> None:
    """Each state, saved as a new checkpoint or replacing one, raises ValueError starting
    with its message, and the thread's checkpoints stay as they were."""
    await checkpointer.save(make_state(1), "t", "first")
    await checkpointer.save(make_state(2), "t", "second")
    for bad, message in refused_states:
        for checkpoint_id in ("first", "second", None):  # replacing one, or a new one
            with pytest.raises(ValueError) as refused:
                await checkpointer.save(bad, "t", checkpoint_id)
            assert str(refused.value).startswith(message), (str(refused.value), checkpoint_id)
    assert await checkpointer.list_checkpoints("t") == ["second", "first"]
    for reader in _readers(checkpointer):
        assert await reader.load("t", "first") == make_state(1)
        assert await reader.load("t", "second") == make_state(2)
        assert await reader.load("t") == make_state(2)


async def test_a_state_json_cannot_hold_is_refused_naming_where_and_leaves_the_thread(
    checkpointer,
):
    """A value JSON cannot hold anywhere in the state (metadata, a message's metadata, a
    tool call's arguments...) raises ValueError naming its path and type, before anything
    is written: the thread's checkpoints, the one it would replace too, stay as they were."""
    await _assert_refused_leaving_the_thread(checkpointer, _states_json_cannot_hold())


def _states_with_keys_that_are_not_str() -> list[tuple[AgentState, str]]:
    """(state, the start of the ValueError saving it raises): a dict key JSON would turn
    into a string, in each part of a state that is the caller's."""
    holds = "is not JSON-serialisable: it is of type"
    keys = "and the keys of a checkpoint's dicts must be str"
    return [
        (AgentState(metadata={1: "a"}), f"state.metadata[1] (the key) {holds} int, {keys}"),
        (
            AgentState(metadata={"1": "b", 1: "a"}),  # json would keep one of the two
            f"state.metadata[1] (the key) {holds} int, {keys}",
        ),
        (
            AgentState(metadata={"scores": [{"x": 1}, {2.5: "y"}]}),
            f"state.metadata.scores[1][2.5] (the key) {holds} float, {keys}",
        ),
        (
            AgentState(messages=[Message(Role.USER, "hi", metadata={None: 1, True: 2})]),
            f"state.messages[0].metadata[None] (the key) {holds} NoneType, {keys}",
        ),
        (
            AgentState(
                messages=[
                    Message(Role.USER, "flag it"),
                    Message(
                        Role.ASSISTANT,
                        "",
                        tool_calls=[ToolCall("c1", "set", {"flags": {True: "on"}})],
                    ),
                ]
            ),
            f"state.messages[1].tool_calls[0].arguments.flags[True] (the key) {holds} bool, {keys}",
        ),
    ]


async def test_a_dict_key_that_is_not_a_str_is_refused_naming_where_and_leaves_the_thread(
    checkpointer,
):
    """JSON writes an int, float, bool or None key as a string: ``{1: "a"}`` would load
    back as ``{"1": "a"}``, and ``{1: "a", "1": "b"}`` as one key. Such a key raises
    ValueError naming its path before anything is written; str keys that read like one
    ("1", "null") are stored as they are."""
    await _assert_refused_leaving_the_thread(checkpointer, _states_with_keys_that_are_not_str())
    look_alike = AgentState(
        messages=[
            Message(
                Role.ASSISTANT,
                "",
                tool_calls=[ToolCall("c1", "page", {"1": [{"-2.5e+16": None}]})],
                metadata={"true": 1, "null": 2},
            )
        ],
        metadata={"2024": {"NaN": "x", "-Infinity": "y"}, "list": ["1", "false"]},
    )
    checkpoint_id = await checkpointer.save(look_alike, "t")
    for reader in _readers(checkpointer):
        assert await reader.load("t", checkpoint_id) == look_alike


def _states_with_lone_surrogates() -> list[tuple[AgentState, str]]:
    """(state, the start of the ValueError saving it raises): a lone surrogate, which
    UTF-8 cannot encode, in each text of a state."""
    holds = "holds a lone surrogate"
    return [
        (
            AgentState(messages=[Message(Role.USER, "q\ud800")]),
            rf"state.messages[0].content {holds} ('\ud800' at index 1), which UTF-8 cannot",
        ),
        (
            AgentState(metadata={"note": ["ok", "é\udfff"]}),
            rf"state.metadata.note[1] {holds} ('\udfff' at index 1)",
        ),
        (
            AgentState(metadata={"a\udc00": 1}),
            rf"state.metadata['a\udc00'] (the key) {holds} ('\udc00' at index 1)",
        ),
        (
            AgentState(
                messages=[
                    Message(
                        Role.ASSISTANT,
                        "",
                        tool_calls=[ToolCall("c\ud83d", "search", {"q": "tulips"})],
                    )
                ]
            ),
            rf"state.messages[0].tool_calls[0].id {holds} ('\ud83d' at index 1)",
        ),
        (
            AgentState(
                messages=[
                    Message(Role.USER, "hi"),
                    Message(
                        Role.ASSISTANT,
                        "",
                        tool_calls=[ToolCall("c1", "search", {"q": ["\ude00 tulips"]})],
                    ),
                ]
            ),
            rf"state.messages[1].tool_calls[0].arguments.q[0] {holds} ('\ude00' at index 0)",
        ),
        (
            AgentState(messages=[Message(Role.USER, "hi", metadata={"seen": {"\ud800": 1}})]),
            rf"state.messages[0].metadata.seen['\ud800'] (the key) {holds}",
        ),
        (
            AgentState(messages=[Message(Role.TOOL, "42", tool_call_id="c1", name="f\udbff")]),
            rf"state.messages[0].name {holds} ('\udbff' at index 1)",
        ),
        (AgentState(thread_id="t\ud800"), rf"state.thread_id {holds} ('\ud800' at index 1)"),
    ]


async def test_a_lone_surrogate_is_refused_naming_where_and_leaves_the_thread(checkpointer):
    """A str may hold a lone surrogate ("\\ud800"), which UTF-8 cannot encode: wherever
    it is (a message's content, metadata keys or values, tool calls, the thread id), every
    backend raises ValueError naming its path before anything is written. A character
    outside the BMP (one code point, not a pair of surrogates) is stored."""
    await _assert_refused_leaving_the_thread(checkpointer, _states_with_lone_surrogates())
    astral = AgentState(
        messages=[Message(Role.USER, "tulips \U0001f337", metadata={"\U0001f337": "\U0001f600"})]
    )
    checkpoint_id = await checkpointer.save(astral, "t")
    for reader in _readers(checkpointer):
        assert await reader.load("t", checkpoint_id) == astral


@pytest.mark.parametrize(
    "thread_id", ["", "\x00", "a\x00b", 7, None, b"bytes", "x" * 256], ids=repr
)
async def test_bad_thread_ids_are_rejected_before_storage(checkpointer, thread_id):
    await checkpointer.save(make_state(1), "t")
    for call in (
        checkpointer.save(make_state(2), thread_id),
        checkpointer.load(thread_id),
        checkpointer.list_checkpoints(thread_id),
        checkpointer.delete(thread_id),
    ):
        with pytest.raises(ValueError, match="thread_id"):
            await call
    assert await checkpointer.list_checkpoints("t", limit=10) != []
    assert await checkpointer.load("t") == make_state(1)


async def test_other_bad_input(checkpointer):
    with pytest.raises(ValueError, match="state must be an AgentState"):
        await checkpointer.save({"messages": []}, "t")
    for bad_id in ("", "a\x00", 5):
        with pytest.raises(ValueError, match="checkpoint_id"):
            await checkpointer.save(make_state(1), "t", bad_id)
        with pytest.raises(ValueError, match="checkpoint_id"):
            await checkpointer.load("t", bad_id)
    for limit in (0, -1, "3", True):
        with pytest.raises(ValueError, match="limit"):
            await checkpointer.list_checkpoints("t", limit=limit)
    assert await checkpointer.list_checkpoints("t") == []


async def test_async_with_returns_the_checkpointer_and_closes_it(checkpointer):
    async with checkpointer as entered:
        assert entered is checkpointer
        await entered.save(make_state(1), "t", "c1")
        assert await entered.load("t", "c1") == make_state(1)
    await checkpointer.aclose()  # closing again is harmless


async def test_async_with_closes_on_error_and_lets_the_error_through(checkpointer):
    with pytest.raises(RuntimeError, match="boom"):
        async with checkpointer:
            raise RuntimeError("boom")


async def test_closed_redis_checkpointer_released_its_connection_pool(redis_prefix):
    """The server's own client list shows the checkpointer's connections gone."""
    import uuid

    import redis.asyncio

    from tests.backends.conftest import REDIS_URL
    from tulip_memory.backends import RedisCheckpointer

    name = f"tulip-close-{uuid.uuid4().hex[:12]}"
    observer = redis.asyncio.Redis.from_url(REDIS_URL)

    async def connections_named() -> int:
        return sum(1 for client in await observer.client_list() if client["name"] == name)

    try:
        async with RedisCheckpointer(f"{REDIS_URL}?client_name={name}", prefix=redis_prefix) as cp:
            await asyncio.gather(*(cp.save(make_state(n), "t") for n in range(5)))
            assert await connections_named() >= 1
        for _ in range(50):  # the server notices a closed socket within milliseconds
            if await connections_named() == 0:
                break
            await asyncio.sleep(0.01)
        assert await connections_named() == 0
    finally:
        await observer.aclose()


def _state_with_nul() -> AgentState:
    return AgentState(
        messages=[
            Message(Role.USER, "before\x00after"),
            Message(
                Role.ASSISTANT,
                "",
                tool_calls=[ToolCall(id="c\x00", name="lookup", arguments={"k\x00": ["v\x00"]})],
                metadata={"raw": "\x00"},
            ),
        ],
        metadata={"note\x00": "x"},
        thread_id="th\x00",
    )


async def test_states_holding_nul_characters(checkpointer):
    """NUL is valid in JSON text; only JSONB (PostgreSQLCheckpointer) cannot hold it."""
    from tulip_memory.backends import PostgreSQLCheckpointer

    kept = await checkpointer.save(make_state(1), "t")
    if isinstance(checkpointer, PostgreSQLCheckpointer):
        with pytest.raises(ValueError, match=r"^state\.thread_id contains a NUL.*DeltaCheck"):
            await checkpointer.save(_state_with_nul(), "t", kept)
        for state, where in (
            (AgentState(messages=[Message(Role.USER, "a\x00")]), "state.messages[0].content"),
            (AgentState(metadata={"a b": {"\x00": 1}}), "state.metadata['a b']['\\x00'] (the key)"),
        ):
            with pytest.raises(ValueError) as refused:
                await checkpointer.save(state, "t")
            assert str(refused.value).startswith(f"{where} contains a NUL character")
        assert await checkpointer.list_checkpoints("t") == [kept]
        assert await checkpointer.load("t") == make_state(1)
        return
    checkpoint_id = await checkpointer.save(_state_with_nul(), "t")
    assert await checkpointer.load("t", checkpoint_id) == _state_with_nul()
    assert await checkpointer.load("t") == _state_with_nul()
    assert await checkpointer.load("t", kept) == make_state(1)
