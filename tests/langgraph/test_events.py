"""Events of the LangGraph integration: DjangoSaver's put, get_tuple, delete_thread, prune
and keep_newest, DjangoStore's writes and deletes; sender the class, no content."""

from __future__ import annotations

import pytest

from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.events import (
    EV_CHECKPOINT_DELETED,
    EV_CHECKPOINT_LOADED,
    EV_CHECKPOINT_PRUNED,
    EV_CHECKPOINT_SAVED,
    EV_STORE_ITEMS_DELETED,
    EV_STORE_ITEMS_WRITTEN,
)
from tulip_memory.langgraph import DjangoSaver, DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

SAVER_EVENTS = (EV_CHECKPOINT_SAVED, EV_CHECKPOINT_LOADED, EV_CHECKPOINT_DELETED)


def _config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


async def test_the_saver_reports_saves_loads_deletes_and_prunes(sent_events):
    saver = DjangoSaver(tenant="acme")
    graph = build_agent(saver)
    await graph.ainvoke(user_turn(0), _config("t1"))
    saved = sent_events.of(EV_CHECKPOINT_SAVED)
    assert saved and {e.sender for e in sent_events.sent} == {DjangoSaver}
    newest = (await saver.aget_tuple(_config("t1"))).config["configurable"]["checkpoint_id"]
    assert saved[-1].fields() == {
        "tenant": "acme",
        "thread_id": "t1",
        "checkpoint_ns": "",
        "checkpoint_id": newest,
    }
    assert "the user" not in repr(sent_events.sent).lower()  # no message text anywhere

    sent_events.clear()
    assert await saver.aget_tuple(_config("nowhere")) is None
    saver.delete_thread("nowhere")
    await saver.adelete_thread("t1")
    assert [(e.event, e.fields()) for e in sent_events.of(*SAVER_EVENTS)] == [
        (
            EV_CHECKPOINT_LOADED,
            {
                "tenant": "acme",
                "thread_id": "nowhere",
                "checkpoint_ns": "",
                "checkpoint_id": None,
                "found": False,
            },
        ),
        (
            EV_CHECKPOINT_DELETED,
            {"tenant": "acme", "thread_id": "nowhere", "checkpoint_id": None, "deleted": False},
        ),
        (
            EV_CHECKPOINT_DELETED,
            {"tenant": "acme", "thread_id": "t1", "checkpoint_id": None, "deleted": True},
        ),
    ]

    await graph.ainvoke(user_turn(0), _config("t2"))
    count = len([t async for t in saver.alist(_config("t2"))])
    sent_events.clear()
    assert await saver.akeep_newest(["t2"], 2) == count - 2
    await saver.aprune(["t2"], strategy="keep_latest")
    await saver.aprune(["t2"], strategy="delete")
    assert [e.fields() for e in sent_events.of(EV_CHECKPOINT_PRUNED)] == [
        {"tenant": "acme", "thread_id": None, "checkpoints": count - 2, "threads": 0},
        {"tenant": "acme", "thread_id": None, "checkpoints": 1, "threads": 0},
        {"tenant": "acme", "thread_id": None, "checkpoints": 1, "threads": 1},
    ]


async def test_the_store_reports_the_writes_and_deletes_of_a_batch(sent_events):
    store = DjangoStore(tenant="acme")
    try:
        await store.aput(("memories", "u1"), "diet", {"text": "vegetarian, secret-tofu"})
        await store.aget(("memories", "u1"), "diet")
        await store.adelete(("memories", "u1"), "diet")
        with pytest.raises(ValueError):  # bad input: refused, nothing sent
            await store.aput(("memories", "u1"), "", {"text": "x"})
    finally:
        store.close()
    sent = [
        (e.sender, e.event, e.fields())
        for e in sent_events.of(EV_STORE_ITEMS_WRITTEN, EV_STORE_ITEMS_DELETED)
    ]
    batch = {"operation": "batch", "tenant": "acme"}
    assert sent == [
        (DjangoStore, EV_STORE_ITEMS_WRITTEN, {**batch, "items": 1, "ttl": None}),
        (DjangoStore, EV_STORE_ITEMS_DELETED, {**batch, "deleted": 1}),
    ]
    assert "secret-tofu" not in repr(sent_events.sent)
