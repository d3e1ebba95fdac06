"""DjangoSaver under a real compiled graph, per tenant, and its storage and bad input.

The agent (tests.langgraph_agent) is a tool-calling loop whose chat model
is scripted (no network). Each test runs the same inputs through LangGraph's own
InMemorySaver as the reference: the state after every turn must be equal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.exceptions import CheckpointCorruptError, TenantError
from tulip_memory.langgraph import DjangoSaver, DjangoStore
from tulip_memory.tenancy import tenant_context

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 200


def _config(thread_id: str, **extra: str) -> dict:
    return {"configurable": {"thread_id": thread_id, **extra}}


async def test_200_turns_give_the_state_in_memory_saver_gives_after_every_turn():
    saver = DjangoSaver(tenant="acme")
    ours, reference = build_agent(saver), build_agent(InMemorySaver())
    config = _config("chat-200")
    for turn in range(TURNS):
        await ours.ainvoke(user_turn(turn), config)
        await reference.ainvoke(user_turn(turn), config)
        got, expected = await ours.aget_state(config), await reference.aget_state(config)
        assert got.values == expected.values, f"turn {turn}"
        assert got.next == expected.next
        assert got.metadata["step"] == expected.metadata["step"]
    assert len(got.values["messages"]) == 4 * TURNS
    # A fresh saver (a new process: nothing cached) reads the same state back.
    fresh = await build_agent(DjangoSaver(tenant="acme")).aget_state(config)
    assert fresh.values == expected.values
    # Every checkpoint, each read with the parents its values are stored against.
    history = [s.values async for s in ours.aget_state_history(config)]
    assert history == [s.values async for s in reference.aget_state_history(config)]
    # Splices: far fewer bytes than the whole list at every version would take.
    whole = sum(
        [
            len(saver.serde.dumps_typed(s.values["messages"])[1])
            async for s in reference.aget_state_history(config)
            if s.values
        ]
    )
    assert await saver.astorage_bytes("chat-200") < whole / 10


def test_the_sync_api_runs_a_graph_too():
    ours, reference = build_agent(DjangoSaver(tenant="acme")), build_agent(InMemorySaver())
    config = _config("sync-chat")
    for turn in range(15):
        ours.invoke(user_turn(turn), config)
        reference.invoke(user_turn(turn), config)
        assert ours.get_state(config).values == reference.get_state(config).values
    ours_history = [s.values for s in ours.get_state_history(config)]
    assert ours_history == [s.values for s in reference.get_state_history(config)]
    # The newest 7 checkpoints kept: those stored against a deleted one get all their values.
    assert ours.checkpointer.keep_newest(["sync-chat"], 7) == len(ours_history) - 7
    assert [s.values for s in ours.get_state_history(config)] == ours_history[:7]


async def test_time_travel_resumes_from_an_older_checkpoint():
    ours, reference = build_agent(DjangoSaver(tenant="acme")), build_agent(InMemorySaver())
    config = _config("travel")
    for turn in range(8):
        await ours.ainvoke(user_turn(turn), config)
        await reference.ainvoke(user_turn(turn), config)

    async def fork(graph):
        # The checkpoint after turn 2's answer: replay a different turn from there.
        history = [s async for s in graph.aget_state_history(config)]
        old = next(s for s in history if len(s.values.get("messages", ())) == 12 and not s.next)
        forked = await graph.ainvoke(user_turn(100), old.config)
        return old, forked

    (old, forked), (_, expected) = await fork(ours), await fork(reference)
    assert forked == expected
    assert len(forked["messages"]) == 16
    # The fork became the thread's newest checkpoint; the old one still loads as it was.
    assert (await ours.aget_state(config)).values == expected
    assert (await ours.aget_state(old.config)).values["messages"] == forked["messages"][:12]


async def test_an_interrupt_waits_for_the_human_and_resumes():
    ours = build_agent(DjangoSaver(tenant="acme"), approve=True)
    reference = build_agent(InMemorySaver(), approve=True)
    config = _config("approval")
    for graph in (ours, reference):
        await graph.ainvoke(user_turn(0), config)
    waiting = await ours.aget_state(config)
    assert waiting.next == ("tools",)
    assert waiting.tasks[0].interrupts[0].value == {"approve": "multiply", "args": {"a": 1, "b": 2}}
    # A fresh saver (another process) sees the interrupt too, and resumes it.
    resumed = await build_agent(DjangoSaver(tenant="acme"), approve=True).ainvoke(
        Command(resume="approved"), config
    )
    expected = await reference.ainvoke(Command(resume="approved"), config)
    assert resumed == expected
    assert resumed["messages"][2].content == "2 approved"


async def test_tenants_see_only_their_threads_and_the_config_cannot_choose_one():
    acme, globex = DjangoSaver(tenant="acme"), DjangoSaver(tenant="globex")
    config = _config("shared-name")
    await build_agent(acme).ainvoke(user_turn(0), config)
    assert await globex.aget_tuple(config) is None
    assert [t async for t in globex.alist(None)] == []
    await globex.adelete_thread("shared-name")
    assert await acme.aget_tuple(config) is not None
    # A tenant in the graph's config is ignored: the saver's own tenant decides.
    assert await globex.aget_tuple(_config("shared-name", tenant="acme")) is None
    # The bound tenant, when the saver has none; a conflicting one is refused.
    unbound = DjangoSaver()
    with pytest.raises(TenantError, match="no tenant"):
        await unbound.aget_tuple(config)
    with tenant_context("acme"):
        assert await unbound.aget_tuple(config) is not None
    with tenant_context("globex"), pytest.raises(TenantError, match="fixed to tenant"):
        await acme.aget_tuple(config)


def _saver_connection(saver: DjangoSaver) -> Any:
    """The saver's own connection (its sync calls run on it, in the calling thread)."""
    from django.db import connections

    return saver._connection.run(lambda: connections["default"])


def _reads(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "langgraph" in q["sql"]]


def test_get_tuple_is_one_statement():
    saver = DjangoSaver(tenant="acme")
    build_agent(saver).invoke(user_turn(0), _config("one-read"))
    with CaptureQueriesContext(_saver_connection(saver)) as queries:
        found = saver.get_tuple(_config("one-read"))
    assert len(found.checkpoint["channel_values"]["messages"]) == 4
    assert len(_reads(queries)) == 1, _reads(queries)
    # In a transaction of its own too.
    with CaptureQueriesContext(connection) as queries:
        found = saver._tuple(*saver._execute("acme", saver._load, (("one-read", "", None),), False))
    assert len(found.checkpoint["channel_values"]["messages"]) == 4
    assert len(_reads(queries)) == 1, _reads(queries)


def test_a_checkpoint_whose_parents_other_rows_lie_between_is_read_in_two_statements():
    """A delta's parents are read in one range of rows when nothing was written between
    them; when another saver's rows lie between (two processes writing one thread), the
    load walks them one by one, a second statement, and finds the same values."""
    first, second, reader = (DjangoSaver(tenant="acme") for _ in range(3))
    config = _config("interleaved")
    first_graph, second_graph = build_agent(first), build_agent(second)
    first_graph.invoke(user_turn(0), config)  # a chain: depth 0, 1, 2, 3
    forked_from = first.get_tuple(config).config
    second_graph.invoke(user_turn(1), config)  # whole (not its parent), then deltas
    second_newest = second.get_tuple(config).config
    # Time travel on the first saver: its checkpoints go on from its last one, as deltas,
    # with the second saver's rows between them and their parents.
    first_graph.invoke(user_turn(2), forked_from)
    newest = first_graph.get_state(config)
    expected = InMemorySaver()
    reference = build_agent(expected)
    reference.invoke(user_turn(0), config)
    reference.invoke(user_turn(2), config)
    assert newest.values["messages"] == reference.get_state(config).values["messages"]
    with CaptureQueriesContext(_saver_connection(reader)) as queries:
        found = reader.get_tuple(config)
    assert found.checkpoint["channel_values"]["messages"] == newest.values["messages"]
    assert len(_reads(queries)) == 2, _reads(queries)
    # The second saver's newest checkpoint: its parents are the rows before it, one range.
    with CaptureQueriesContext(_saver_connection(reader)) as queries:
        found = reader.get_tuple(second_newest)
    assert len(found.checkpoint["channel_values"]["messages"]) == 8
    assert len(_reads(queries)) == 1, _reads(queries)


def test_loads_unpack_an_unchanged_row_once_and_a_changed_row_again(monkeypatch):
    from langgraph.checkpoint.base import empty_checkpoint

    from tulip_memory.chains import rows

    unpacked = []
    unpack_record = rows.unpack_record
    monkeypatch.setattr(
        rows, "unpack_record", lambda *args: unpacked.append(1) or unpack_record(*args)
    )
    writer = DjangoSaver(tenant="acme")
    for turn in range(3):
        build_agent(writer).invoke(user_turn(turn), _config("cached"))
    reader, uncached = DjangoSaver(tenant="acme"), DjangoSaver(tenant="acme", record_cache_bytes=0)
    expected = writer.get_tuple(_config("cached")).checkpoint
    for saver, second_read in ((reader, 0), (uncached, None)):
        unpacked.clear()
        assert saver.get_tuple(_config("cached")).checkpoint == expected
        first_read = len(unpacked)
        assert first_read > 1  # the checkpoint and the parents its values are read from
        assert saver.get_tuple(_config("cached")).checkpoint == expected
        assert len(unpacked) - first_read == (first_read if second_read is None else second_read)

    # A row stored again under the same checkpoint id is a new row version: read anew.
    checkpoint = empty_checkpoint()
    config = writer.put(_config("rewritten"), checkpoint, {"step": 1, "note": "first"}, {})
    assert reader.get_tuple(config).metadata["note"] == "first"
    writer.put(_config("rewritten"), checkpoint, {"step": 1, "note": "second"}, {})
    assert reader.get_tuple(config).metadata["note"] == "second"


def _damage(thread_id: str, **changes: Any) -> int:
    """Change the thread's rows of depth 0 of tenant acme (as someone editing them by hand
    would): delete them (no ``changes``) or update them; how many."""
    from tulip_memory.models import LangGraphCheckpoint
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("acme"):
        rows = LangGraphCheckpoint.objects.filter(tenant="acme", thread_id=thread_id, depth=0)
        return rows.update(**changes) if changes else rows.delete()[0]


def test_the_tenant_is_pinned_for_a_calls_statements_only():
    from tulip_memory.conf import settings

    saver = DjangoSaver(tenant="acme")
    build_agent(saver).invoke(user_turn(0), _config("pinned"))  # puts, writes, reads

    def setting_after() -> object:
        with connection.cursor() as cursor:  # the saver's connection
            cursor.execute("SELECT current_setting(%s, true)", [settings.TENANT_SETTING])
            return cursor.fetchone()[0]

    assert saver._connection.run(setting_after) in ("", None)
    with tenant_context("globex"), pytest.raises(TenantError):
        saver.get_tuple(_config("pinned"))
    assert DjangoSaver(tenant="globex").get_tuple(_config("pinned")) is None


async def test_a_checkpoint_whose_parents_are_gone_is_an_error_naming_it():
    from asgiref.sync import sync_to_async

    saver = DjangoSaver(tenant="acme")
    config = _config("damaged")
    for turn in range(2):
        await build_agent(saver).ainvoke(user_turn(turn), config)
    assert await sync_to_async(_damage)("damaged") == 1
    with pytest.raises(
        CheckpointCorruptError,
        match=r"checkpoint '.*' of thread 'damaged': a checkpoint its values are stored against",
    ):
        await DjangoSaver(tenant="acme").aget_tuple(config)


async def test_damaged_stored_data_is_an_error_naming_the_checkpoint():
    from asgiref.sync import sync_to_async

    saver = DjangoSaver(tenant="acme")
    config = _config("garbled")
    await build_agent(saver).ainvoke(user_turn(0), config)
    assert await sync_to_async(_damage)("garbled", data=b"\x01garbage") == 1
    with pytest.raises(CheckpointCorruptError, match="of thread 'garbled': unreadable stored data"):
        await saver.aget_tuple(config)


async def test_a_delta_on_a_checkpoint_another_saver_deleted_is_stored_whole():
    from asgiref.sync import sync_to_async

    writer, other = DjangoSaver(tenant="acme"), DjangoSaver(tenant="acme")
    config = _config("deleted-meanwhile")
    await build_agent(writer).ainvoke(user_turn(0), config)
    newest = (await writer.aget_tuple(config)).config
    await other.adelete_thread("deleted-meanwhile")  # the writer's cached tip is gone
    # The same list again, one turn longer, put on the writer's tip: a splice of it.
    reference = build_agent(InMemorySaver())
    for turn in range(2):
        await reference.ainvoke(user_turn(turn), config)
    expected = (await reference.aget_state(config)).values
    version = "00000000000000000000000000000099.1"
    checkpoint = (await reference.checkpointer.aget_tuple(config)).checkpoint
    checkpoint = {**checkpoint, "channel_versions": {"messages": version}}
    metadata = {"source": "update", "step": 1, "parents": {}}
    await writer.aput(newest, checkpoint, metadata, {"messages": version})
    found = await other.aget_tuple(config)
    assert found.checkpoint["channel_values"]["messages"] == expected["messages"]

    def depths() -> list[int]:
        from tulip_memory.models import LangGraphCheckpoint
        from tulip_memory.tenancy import tenant_atomic

        with tenant_atomic("acme"):
            rows = LangGraphCheckpoint.objects.filter(tenant="acme", thread_id="deleted-meanwhile")
            return list(rows.values_list("depth", flat=True))

    assert await sync_to_async(depths)() == [0]


def _reput(saver: Any, put: Callable[..., Any]) -> None:
    """Put checkpoint 1, its child 2 and grandchild 3 (deltas), then 1 again (the same id)
    with other metadata, with ``put`` (``saver.put`` or a call of it)."""
    from langgraph.checkpoint.base import empty_checkpoint

    def checkpoint(checkpoint_id: str, values: dict, versions: dict) -> Any:
        found = empty_checkpoint()
        found.update(id=checkpoint_id, channel_values=values, channel_versions=versions)
        return found

    base = _config("reput", checkpoint_ns="")
    v1 = saver.get_next_version(None, None)
    first = checkpoint("1", {"a": "x" * 50, "b": [1, 2, 3]}, {"a": v1, "b": v1})
    config = put(base, first, {"source": "input", "step": 0, "note": "first"}, {"a": v1, "b": v1})
    v2 = saver.get_next_version(v1, None)
    second = checkpoint("2", {"a": "x" * 50, "b": [1, 2, 3, 4]}, {"a": v1, "b": v2})
    config = put(config, second, {"source": "loop", "step": 1}, {"b": v2})
    v3 = saver.get_next_version(v2, None)
    third = checkpoint("3", {"a": "y", "b": [1, 2, 3, 4, 5]}, {"a": v3, "b": v3})
    put(config, third, {"source": "loop", "step": 2}, {"a": v3, "b": v3})
    again = checkpoint("1", {"a": "x" * 50, "b": [1, 2, 3]}, {"a": v1, "b": v1})
    put(base, again, {"source": "input", "step": 0, "note": "REWRITTEN " + "y" * 40}, {})


def _reput_loads(saver: Any) -> list[Any]:
    """The values, metadata and parent of checkpoints 1, 2, 3 of :func:`_reput`."""
    found = []
    for checkpoint_id in ("1", "2", "3"):
        loaded = saver.get_tuple(_config("reput", checkpoint_ns="", checkpoint_id=checkpoint_id))
        parent = loaded.parent_config
        found.append(
            (
                loaded.checkpoint["channel_values"],
                loaded.metadata,
                parent and parent["configurable"]["checkpoint_id"],
            )
        )
    return found


def test_a_checkpoint_put_again_leaves_the_ones_stored_against_it_readable():
    """LangGraph's savers overwrite a checkpoint put again under its id. Its children
    stored as deltas (their data deflated with the parent's as dictionary, their values
    read from its row) first get every value they need, in the same transaction."""
    from functools import partial

    reference = InMemorySaver()
    _reput(reference, reference.put)
    expected = _reput_loads(reference)
    assert expected[0][1]["note"].startswith("REWRITTEN")
    saver = DjangoSaver(tenant="acme")
    _reput(saver, saver.put)
    assert _reput_loads(saver) == expected
    assert _reput_loads(DjangoSaver(tenant="acme")) == expected  # nothing cached
    # In a transaction of the caller's (with psycopg's server-side binding, say) too.
    saver.delete_thread("reput")
    in_transaction = DjangoSaver(tenant="acme")

    def put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        from tulip_memory.langgraph.saver import _check_put

        call = partial(in_transaction._put, pin=None)
        checked = _check_put(config, checkpoint, metadata, new_versions)
        return in_transaction._connection.run(
            in_transaction._execute, "acme", call, (checked, checkpoint, new_versions), False
        )

    _reput(in_transaction, put)
    assert _reput_loads(DjangoSaver(tenant="acme")) == expected


async def test_a_checkpoint_put_again_with_the_async_api_too():
    from asgiref.sync import async_to_sync, sync_to_async

    reference = InMemorySaver()
    _reput(reference, reference.put)
    saver = DjangoSaver(tenant="acme")
    await sync_to_async(_reput, thread_sensitive=False)(saver, async_to_sync(saver.aput))
    fresh = DjangoSaver(tenant="acme")
    assert await sync_to_async(_reput_loads, thread_sensitive=False)(fresh) == _reput_loads(
        reference
    )


async def test_pending_writes_sent_before_their_checkpoint_wait_for_it():
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    checkpoint = empty_checkpoint()
    config = _config("writes-first", checkpoint_ns="", checkpoint_id=checkpoint["id"])
    await saver.aput_writes(config, [("messages", ["early"])], "task-1", "~a")
    # Held in a row without a checkpoint: nothing to load, list or count yet.
    assert await saver.aget_tuple(_config("writes-first")) is None
    assert [t async for t in saver.alist(_config("writes-first"))] == []
    assert await saver.astorage_bytes("writes-first") > 0
    await saver.aput(_config("writes-first"), checkpoint, {"step": -1}, {})
    await saver.aput_writes(config, [("messages", ["late"])], "task-2", "~b")
    found = await saver.aget_tuple(_config("writes-first"))
    assert found.checkpoint["id"] == checkpoint["id"]
    assert found.pending_writes == [
        ("task-1", "messages", ["early"]),
        ("task-2", "messages", ["late"]),
    ]
    await saver.adelete_thread("writes-first")
    assert await saver.astorage_bytes("writes-first") == 0


async def test_bad_input_is_refused_with_what_is_wrong():
    saver = DjangoSaver(tenant="acme")
    with pytest.raises(ValueError, match="thread_id"):
        await saver.aget_tuple({"configurable": {}})
    with pytest.raises(ValueError, match="thread_id"):
        await saver.aget_tuple(_config(""))
    with pytest.raises(ValueError, match="strategy"):
        await saver.aprune(["t"], strategy="keep_some")
    with pytest.raises(ValueError, match="limit"):
        [t async for t in saver.alist(None, limit="3")]
    with pytest.raises(ValueError, match="checkpoint_id"):
        await saver.aput_writes(_config("t"), [("a", 1)], "task")
    for bad in (-1, True, "5"):
        with pytest.raises(ValueError, match="max_chain_depth"):
            DjangoSaver(tenant="acme", max_chain_depth=bad)
        with pytest.raises(ValueError, match="record_cache_bytes"):
            DjangoSaver(tenant="acme", record_cache_bytes=bad)


def _bad_calls(saver: DjangoSaver, aio: bool) -> list[tuple[Callable[[], Any], str]]:
    """Calls with a namespace, checkpoint id or run id no column can hold, and the error
    each must raise; ``aio``: of the async API (each call then returns an awaitable)."""
    from langgraph.checkpoint.base import empty_checkpoint

    def checkpoint(checkpoint_id: str | None = None) -> Any:
        found = empty_checkpoint()
        if checkpoint_id is not None:
            found["id"] = checkpoint_id
        return found

    put, put_writes = (saver.aput, saver.aput_writes) if aio else (saver.put, saver.put_writes)
    get_tuple = saver.aget_tuple if aio else saver.get_tuple

    def listed(config: Any, **options: Any) -> Any:
        if aio:
            return _alist(saver.alist(config, **options))
        return list(saver.list(config, **options))

    field = r"^config\['configurable'\]\['{}'\] "
    nul, long_ns, long_id = "a\x00b", "n" * 256, "c" * 129
    return [
        (lambda: put(_config("t", checkpoint_ns=nul), checkpoint(), {}, {}), "checkpoint_ns"),
        (lambda: put(_config("t", checkpoint_ns=long_ns), checkpoint(), {}, {}), "checkpoint_ns"),
        (lambda: put(_config("t", checkpoint_id=nul), checkpoint(), {}, {}), "checkpoint_id"),
        (lambda: put(_config("t"), checkpoint(long_id), {}, {}), r"^checkpoint\['id'\] is 129"),
        (lambda: put(_config("t"), checkpoint(nul), {}, {}), r"^checkpoint\['id'\] must not"),
        (lambda: put(_config("t"), checkpoint(), {"run_id": "r" * 256}, {}), "run_id"),
        (lambda: put_writes(_config("t", checkpoint_id=long_id), [("a", 1)], "task"), "_id"),
        (lambda: put_writes(_config("t", checkpoint_ns=nul, checkpoint_id="1"), [], "x"), "_ns"),
        (lambda: get_tuple(_config("t", checkpoint_ns=nul)), "checkpoint_ns"),
        (lambda: get_tuple(_config("t", checkpoint_id=long_id)), "checkpoint_id"),
        (lambda: listed(_config("t", checkpoint_ns=long_ns)), "checkpoint_ns"),
        (lambda: listed(_config("t", checkpoint_id=nul)), "checkpoint_id"),
        (lambda: listed(None, before=_config("t", checkpoint_id=nul)), r"^before\['config"),
    ], field


async def _alist(found: Any) -> list[Any]:
    return [item async for item in found]


def _refusal(message: str, field: str) -> str:
    """The error's pattern: a field name alone stands for the config's (or the run id's)."""
    if message.startswith("^"):
        return message
    if message == "run_id":
        return r"^metadata\['run_id'\] is 256 characters long, over 255$"
    name = {"_id": "checkpoint_id", "_ns": "checkpoint_ns"}.get(message, message)
    return field.format(name) + r"(must not contain a NUL character|is \d+ characters long)"


def test_a_namespace_checkpoint_id_or_run_id_no_column_holds_is_refused_before_any_query():
    """NUL characters and values longer than their column are ValueErrors naming the
    field, for put, put_writes, get_tuple and list, before a statement is sent (they were
    the database's DataError); the longest values the columns hold are stored. (LangGraph
    itself takes NUL characters out of the metadata's strings, the run id's too.)"""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    calls, field = _bad_calls(saver, aio=False)
    with CaptureQueriesContext(_saver_connection(saver)) as queries:
        for call, message in calls:
            with pytest.raises(ValueError, match=_refusal(message, field)):
                call()
    assert queries.captured_queries == []
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "c" * 128
    config = _config("t", checkpoint_ns="n" * 255)
    saved = saver.put(config, checkpoint, {"run_id": "r" * 255}, {})
    saver.put_writes(saved, [("a", 1)], "task")
    found = DjangoSaver(tenant="acme").get_tuple(saved)
    assert found.metadata["run_id"] == "r" * 255
    assert found.pending_writes == [("task", "a", 1)]
    assert [t.config for t in saver.list(config)] == [saved]


async def test_the_async_api_refuses_them_too():
    saver = DjangoSaver(tenant="acme")
    calls, field = _bad_calls(saver, aio=True)
    for call, message in calls:
        with pytest.raises(ValueError, match=_refusal(message, field)):
            await call()
    assert [t async for t in saver.alist(None)] == []


def test_versions_are_short_sort_in_counter_order_and_follow_postgres_savers():
    saver = DjangoSaver(tenant="acme")
    first = saver.get_next_version(None, None)
    assert re.fullmatch(r"000000000001\.[0-9a-f]{8}", first)
    versions = [first]
    for _ in range(12):
        versions.append(saver.get_next_version(versions[-1], None))
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert saver.get_next_version(7, None).startswith("000000000008.")
    # A thread written with PostgresSaver's versions goes on, still in order.
    theirs = "00000000000000000000000000000999.0.14364237311299288"
    ours = saver.get_next_version(theirs, None)
    assert ours.startswith("000000001000.") and ours > theirs
    # Two forks at one counter get different versions.
    assert len({saver.get_next_version(theirs, None) for _ in range(50)}) == 50
    with pytest.raises(ValueError, match="reached 999999999999 versions"):
        saver.get_next_version("999999999999.00000000", "messages")


async def test_bad_thread_and_run_ids_are_refused_before_anything_is_deleted_or_copied():
    saver = DjangoSaver(tenant="acme")
    await build_agent(saver).ainvoke(user_turn(0), _config("123"))
    stored = len([t async for t in saver.alist(_config("123"))])
    refusals = [
        (saver.adelete_thread({"x": 1}), r"^thread_id must be a str, got dict$"),
        (saver.adelete_thread(123), r"^thread_id must be a str, got int$"),
        (saver.adelete_thread("1\x0023"), r"^thread_id must not contain a NUL character$"),
        (saver.acopy_thread(123, "copy"), r"^source_thread_id must be a str, got int$"),
        (saver.acopy_thread("123", "c" * 256), r"^target_thread_id is 256 characters long, over"),
        (saver.aprune("123"), r"^thread_ids must be a sequence of thread ids, got '123'$"),
        (saver.aprune(["123", 7]), r"^thread_ids\[1\] must be a str, got int$"),
        (saver.adelete_for_runs("run-1"), r"^run_ids must be a sequence of run ids"),
        (saver.akeep_newest("123", 1), r"^thread_ids must be a sequence of thread ids"),
        (saver.astorage_bytes(None), r"^thread_id must be a str, got NoneType$"),
    ]
    for call, message in refusals:
        with pytest.raises(ValueError, match=message):
            await call
    assert len([t async for t in saver.alist(_config("123"))]) == stored
    assert [t async for t in saver.alist(_config("c" * 255))] == []
    sync = DjangoSaver(tenant="acme")
    with pytest.raises(ValueError, match=r"^thread_id must be a str, got dict$"):
        sync.delete_thread({"x": 1})
    with pytest.raises(ValueError, match=r"^source_thread_id must be a str, got int$"):
        sync.copy_thread(123, "copy")
    assert len([t async for t in saver.alist(_config("123"))]) == stored


LONE = "a\ud800b"  # a lone surrogate: UTF-8 cannot encode it


def _text_calls(saver: DjangoSaver, saved: Any, aio: bool) -> list[tuple[Callable[[], Any], str]]:
    """Calls with text no column or stored frame can hold (a NUL, a lone surrogate) or an
    empty run id, and the error each must raise (the driver's DataError or Python's
    UnicodeEncodeError before); ``aio``: of the async API."""
    from langgraph.checkpoint.base import empty_checkpoint

    put, put_writes = (saver.aput, saver.aput_writes) if aio else (saver.put, saver.put_writes)
    delete_for_runs = saver.adelete_for_runs if aio else saver.delete_for_runs
    channel = empty_checkpoint()
    channel["channel_values"] = {LONE: 1}
    channel["channel_versions"] = {LONE: "000000000001.00000000"}
    unicode = "must be valid Unicode: lone surrogate at index 1$"
    return [
        (lambda: delete_for_runs(["a\x00b"]), r"^run_ids\[0\] must not contain a NUL character$"),
        (lambda: delete_for_runs(["run", LONE]), rf"^run_ids\[1\] {unicode}"),
        (lambda: delete_for_runs([""]), r"^run_ids\[0\] must not be empty$"),
        (lambda: put_writes(saved, [("a", 2)], LONE), rf"^task_id {unicode}"),
        (lambda: put_writes(saved, [("a", 2)], "t\x00"), r"^task_id must not contain a NUL"),
        (lambda: put_writes(saved, [("a", 2)], "task", LONE), rf"^task_path {unicode}"),
        (
            lambda: put_writes(saved, [("a", 2), (LONE, 3)], "task"),
            rf"^writes\[1\] channel {unicode}",
        ),
        (
            lambda: put_writes(saved, ["a"], "task"),
            r"^writes\[0\] must be a \(channel, value\) pair",
        ),
        (
            lambda: put(_config("t"), channel, {}, {LONE: "000000000001.00000000"}),
            r"^checkpoint\['channel_versions'\] key 'a\\ud800b' " + unicode,
        ),
        (
            lambda: put(_config("t"), empty_checkpoint(), {LONE: 1}, {}),
            r"^metadata\['a\\ud800b'\] \(the key\) holds a lone surrogate",
        ),
        (
            lambda: put(_config("t"), empty_checkpoint(), {"note": [LONE]}, {}),
            r"^metadata.note\[0\] holds a lone surrogate",
        ),
    ]


def test_text_no_column_can_hold_is_refused_naming_the_argument_and_nothing_changes():
    """A NUL or a lone surrogate in a run id, a task id or path, a channel's name or the
    metadata is a ValueError naming it before any statement (it was psycopg's DataError,
    a UnicodeEncodeError or serde's TypeError); an empty run id is refused instead of
    deleting every checkpoint without a run id."""
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    saved = saver.put(_config("t"), empty_checkpoint(), {}, {})
    saver.put_writes(saved, [("a", 1)], "task")
    before = DjangoSaver(tenant="acme").get_tuple(saved)
    with CaptureQueriesContext(_saver_connection(saver)) as queries:
        for call, message in _text_calls(saver, saved, aio=False):
            with pytest.raises(ValueError, match=message):
                call()
    assert queries.captured_queries == []
    assert DjangoSaver(tenant="acme").get_tuple(saved) == before
    assert [t.config for t in saver.list(None)] == [saved]


async def test_the_async_api_refuses_such_text_too():
    from langgraph.checkpoint.base import empty_checkpoint

    saver = DjangoSaver(tenant="acme")
    saved = await saver.aput(_config("t"), empty_checkpoint(), {}, {})
    await saver.aput_writes(saved, [("a", 1)], "task")
    before = await saver.aget_tuple(saved)
    for call, message in _text_calls(saver, saved, aio=True):
        with pytest.raises(ValueError, match=message):
            await call()
    assert await DjangoSaver(tenant="acme").aget_tuple(saved) == before


def _backend_pid() -> int:
    from django.db import connections

    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _drop_the_connection(run: Callable[[Callable[[], int]], int]) -> None:
    """The server ends the backend of the connection that ``run`` runs its function on
    (as a restart would)."""
    pid = run(_backend_pid)
    with psycopg.connect(os.environ["TULIP_TEST_ADMIN_URL"], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_threads_share_the_savers_connection_one_call_at_a_time():
    """Sync calls run in the calling threads on the saver's one connection, in turns:
    LangGraph calls a sync graph's saver from threads that live for one invoke."""
    from concurrent.futures import ThreadPoolExecutor

    saver = DjangoSaver(tenant="acme")
    reference = InMemorySaver()
    graphs = [(build_agent(saver), build_agent(reference)) for _ in range(4)]

    def run(index: int) -> int:
        ours, theirs = graphs[index]
        config = _config(f"threads-{index}")
        for turn in range(3):
            ours.invoke(user_turn(turn), config)
            theirs.invoke(user_turn(turn), config)
            assert ours.get_state(config).values == theirs.get_state(config).values
        return saver._connection.run(_backend_pid)

    with ThreadPoolExecutor(max_workers=4) as pool:
        backends = set(pool.map(run, range(4)))
    assert backends == {saver._connection.run(_backend_pid)}
    assert _backend_pid() not in backends  # not the test thread's own connection


def test_a_sync_call_in_the_callers_transaction_stays_apart_from_it():
    """The saver's calls commit on its own connection: a checkpoint stays when the
    caller's transaction rolls back, and the caller's connection is its own again after
    each call."""
    from django.db import transaction

    saver = DjangoSaver(tenant="acme")
    config = _config("apart")
    with pytest.raises(RuntimeError), transaction.atomic():
        build_agent(saver).invoke(user_turn(0), config)
        assert connection.in_atomic_block  # the test thread's own connection, restored
        raise RuntimeError("the caller's transaction rolls back")
    assert not connection.in_atomic_block
    stored = DjangoSaver(tenant="acme").get_tuple(config)
    assert len(stored.checkpoint["channel_values"]["messages"]) == 4


def _in_a_child(saver: DjangoSaver, found: Any) -> None:
    """In a forked child: read with the parent's saver, send what it saw, and leave at once
    (the test process's other threads, not the child's, hold locks its exit would wait for)."""
    tuple_ = saver.get_tuple(_config("forked"))
    found.put(
        (saver._connection.run(_backend_pid), len(tuple_.checkpoint["channel_values"]["messages"]))
    )
    found.close()
    found.join_thread()
    os._exit(0)


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents():
    import multiprocessing

    saver = DjangoSaver(tenant="acme")
    build_agent(saver).invoke(user_turn(0), _config("forked"))
    parents = saver._connection.run(_backend_pid)
    context = multiprocessing.get_context("fork")
    found = context.Queue()
    child = context.Process(target=_in_a_child, args=(saver, found))
    child.start()
    childs, messages = found.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert messages == 4 and childs != parents
    # The parent's connection is still its own and usable.
    assert saver._connection.run(_backend_pid) == parents
    assert saver.get_tuple(_config("forked")) is not None


def test_the_sync_api_reconnects_after_the_server_dropped_its_connection():
    from django.db import OperationalError, connections

    saver = DjangoSaver(tenant="acme")
    config = _config("dropped")
    build_agent(saver).invoke(user_turn(0), config)
    # As Django's requests: the call that meets the dead connection fails, the next
    # reconnects.
    _drop_the_connection(saver._connection.run)
    with pytest.raises(OperationalError):
        saver.get_tuple(config)
    assert saver.get_tuple(config) is not None
    # With CONN_HEALTH_CHECKS the connection is tested before each call: none fails.
    settings = connections.settings["default"]
    settings["CONN_HEALTH_CHECKS"] = True
    try:
        _drop_the_connection(saver._connection.run)
        assert saver.get_tuple(config) is not None
        store = DjangoStore(tenant="acme")
        store.put(("users", "u1"), "k", {"text": "tea"})
        _drop_the_connection(lambda f: store._worker.submit(f).result())
        assert store.get(("users", "u1"), "k").value == {"text": "tea"}
        store.close()
    finally:
        settings["CONN_HEALTH_CHECKS"] = False


@pytest.mark.parametrize("writes", [False, True], ids=["put", "put-then-writes"])
def test_a_parent_put_again_by_another_saver_is_not_taken_from_this_savers_cache(writes):
    """Two savers (two processes) on one thread: one puts a checkpoint, the other puts
    it again under its id with other values, then the first (after its task's pending
    writes on it, as LangGraph sends them) puts a child of it. The child is not
    compressed against the values the first saver remembers: a fresh saver reads the
    child as it was put."""
    from langgraph.checkpoint.base import empty_checkpoint

    def checkpoint(checkpoint_id: str, values: dict, versions: dict) -> Any:
        found = empty_checkpoint()
        found.update(id=checkpoint_id, channel_values=values, channel_versions=versions)
        return found

    first, second = DjangoSaver(tenant="acme"), DjangoSaver(tenant="acme")
    base = _config("two-writers", checkpoint_ns="")
    v1 = first.get_next_version(None, None)
    config = first.put(
        base,
        checkpoint("1", {"a": "x", "b": [1, 2, 3]}, {"a": v1, "b": v1}),
        {},
        {"a": v1, "b": v1},
    )
    # The other saver stores checkpoint 1 again with other values under the same versions.
    second.put(
        base,
        checkpoint("1", {"a": "z", "b": [7, 8, 9]}, {"a": v1, "b": v1}),
        {},
        {"a": v1, "b": v1},
    )
    if writes:
        first.put_writes(config, [("b", [4])], "task-1")
    v2 = first.get_next_version(v1, None)
    child = checkpoint("2", {"a": "x", "b": [1, 2, 3, 4]}, {"a": v1, "b": v2})
    saved = first.put(config, child, {"step": 1}, {"b": v2})
    found = DjangoSaver(tenant="acme").get_tuple(saved)
    assert found.checkpoint["channel_values"] == {"a": "x", "b": [1, 2, 3, 4]}


@pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") != "citus",
    reason="runs on a Citus cluster (TULIP_TEST_BACKEND=citus: make test-citus)",
)
def test_a_put_and_a_load_of_one_thread_each_run_on_one_shard():
    """On Citus: the statements of a put and of a load plan as one task (the
    tenant's shard; the upsert's SELECT, whose row then goes to that shard)."""
    from django.db import connections
    from langgraph.checkpoint.base import create_checkpoint

    from tulip_memory.tenancy import tenant_atomic

    saver = DjangoSaver(tenant="acme")
    build_agent(saver).invoke(user_turn(0), _config("routed"))
    newest = saver.get_tuple(_config("routed"))
    calls: list[tuple[str, Any]] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        calls.append((sql, params))
        return execute(sql, params, many, context)

    with _saver_connection(saver).execute_wrapper(record):
        child = create_checkpoint(newest.checkpoint, None, 9)
        saver.get_tuple(saver.put(newest.config, child, {"step": 9}, {}))
    statements = [(sql, params) for sql, params in calls if "langgraph_checkpoint" in sql]
    assert [sql.split()[0] for sql, _ in statements] == ["INSERT", "WITH"]
    for sql, params in statements:
        with tenant_atomic("acme"), connections["default"].cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(line for (line,) in cursor.fetchall())
        assert plan.count("Task Count: 1\n") == 1 and plan.count("Task Count") == 1, plan
