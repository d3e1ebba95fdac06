"""Migration 0012 turns the rows of the saver's three tables into one row per checkpoint,
and DjangoSaver reads them back as they were; 0017 gives the rows a version, on Citus too."""

from __future__ import annotations

import json
import os

import pytest
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "owner"])

BEFORE = "0011_store_item_ttl"
# A database is distributed once migrated (tulip_memory_distribute): going back before
# 0012 there re-creates tables whose statement triggers no shard can run (no transition
# table on a worker), and 0012's AddField of a positive integer is an ADD COLUMN with a
# CHECK constraint, which Citus refuses on a distributed table.
before_citus = pytest.mark.skipif(
    os.environ.get("TULIP_TEST_BACKEND") == "citus",
    reason="Citus refuses ADD COLUMN with a CHECK constraint on a distributed table (0012) "
    "and runs no statement trigger with a transition table on a shard (0007, 0008)",
)
IDS = [f"1f000000-0000-6000-8000-00000000000{i}" for i in (1, 2, 3)]
MESSAGES = [HumanMessage("hello", id="m1"), AIMessage("hi", id="m2"), HumanMessage("bye", id="m3")]


def _migrate(target: str) -> None:
    executor = MigrationExecutor(connections["owner"])
    executor.migrate([("tulip_memory", target)])


def _migrate_to_the_newest() -> None:
    (newest,) = MigrationExecutor(connections["owner"]).loader.graph.leaf_nodes("tulip_memory")
    _migrate(newest[1])


@pytest.fixture(autouse=True)
def _back_to_the_newest_migration():
    """The tests after this one expect every migration applied."""
    yield
    _migrate_to_the_newest()


def _store_a_thread_as_the_three_tables_held_it() -> None:
    """Three checkpoints: the messages whole, then two splices; pending writes on the
    newest and on a checkpoint that was never stored; a version without a value."""
    serde = JsonPlusSerializer()
    with tenant_atomic("acme", using="owner"), connections["owner"].cursor() as cursor:
        for i, checkpoint_id in enumerate(IDS):
            body = {"v": 4, "id": checkpoint_id, "ts": f"2026-01-0{i + 1}T00:00:00+00:00"}
            body |= {"versions_seen": {}, "updated_channels": ["messages"]}
            metadata = {"source": "loop", "step": i, "parents": {}, "run_id": "run-1"}
            cursor.execute(
                "INSERT INTO tulip_memory_langgraph_checkpoint (tenant, thread_id, "
                "checkpoint_ns, checkpoint_id, parent_checkpoint_id, run_id, checkpoint_type, "
                "checkpoint, channel_versions, metadata_type, metadata, created_at, subject) "
                "VALUES ('acme', 'old', '', %s, %s, 'run-1', %s, %s, %s, %s, %s, now(), '')",
                [
                    checkpoint_id,
                    IDS[i - 1] if i else "",
                    *serde.dumps_typed(body),
                    json.dumps({"messages": f"v{i + 1}", "__start__": "s1"}),
                    *serde.dumps_typed(metadata),
                ],
            )
        blobs = [
            ("messages", "v1", "", "v1", 0, serde.dumps_typed(MESSAGES[:1])),
            ("messages", "v2", "v1", "v1", 1, serde.dumps_typed([1, 0, MESSAGES[1:2]])),
            ("messages", "v3", "v2", "v1", 2, serde.dumps_typed([2, 0, MESSAGES[2:]])),
            ("__start__", "s1", "", "s1", 0, ("empty", None)),
        ]
        for channel, version, parent, base, depth, (type_, data) in blobs:
            cursor.execute(
                "INSERT INTO tulip_memory_langgraph_blob (tenant, thread_id, checkpoint_ns, "
                "channel, version, parent_version, base_version, depth, type, data) "
                "VALUES ('acme', 'old', '', %s, %s, %s, %s, %s, %s, %s)",
                [channel, version, parent, base, depth, type_, data],
            )
        writes = [
            (IDS[2], "task-1", 0, "messages", [AIMessage("sure", id="m4")]),
            (IDS[2], "task-1", 1, "branch:to:agent", None),
            ("1f000000-0000-6000-8000-000000000009", "task-2", 0, "messages", []),
        ]
        for checkpoint_id, task_id, idx, channel, value in writes:
            cursor.execute(
                "INSERT INTO tulip_memory_langgraph_write (tenant, thread_id, checkpoint_ns, "
                "checkpoint_id, task_id, task_path, idx, channel, type, data) "
                "VALUES ('acme', 'old', '', %s, %s, '~p', %s, %s, %s, %s)",
                [checkpoint_id, task_id, idx, channel, *serde.dumps_typed(value)],
            )


@before_citus
def test_0012_converts_the_stored_checkpoints_values_and_pending_writes():
    _migrate(BEFORE)
    try:
        _store_a_thread_as_the_three_tables_held_it()
    finally:
        _migrate_to_the_newest()  # through 0012, to the schema the saver reads
    saver = DjangoSaver(tenant="acme")
    config = {"configurable": {"thread_id": "old"}}
    newest = saver.get_tuple(config)
    assert newest.checkpoint["id"] == IDS[2]
    assert newest.checkpoint["channel_values"] == {"messages": MESSAGES}
    assert newest.checkpoint["channel_versions"] == {"messages": "v3", "__start__": "s1"}
    assert newest.metadata["step"] == 2
    assert newest.parent_config["configurable"]["checkpoint_id"] == IDS[1]
    assert newest.pending_writes == [
        ("task-1", "messages", [AIMessage("sure", id="m4")]),
        ("task-1", "branch:to:agent", None),
    ]
    history = list(saver.list(config))
    assert [t.checkpoint["id"] for t in history] == IDS[::-1]
    assert [t.checkpoint["channel_values"]["messages"] for t in history] == [
        MESSAGES,
        MESSAGES[:2],
        MESSAGES[:1],
    ]
    assert [t.pending_writes for t in history[1:]] == [[], []]
    # Stored against their parents: the values they add, not the whole list again.
    from tulip_memory.models import LangGraphCheckpoint

    with tenant_atomic("acme"):
        rows = LangGraphCheckpoint.objects.filter(thread_id="old").order_by("checkpoint_id")
        assert list(rows.values_list("depth", flat=True)) == [0, 1, 2]
        assert LangGraphCheckpoint.rows.filter(thread_id="old").count() == 3
    saver.delete_for_runs(["run-1"])
    assert saver.get_tuple(config) is None


@before_citus
def test_going_back_from_0012_restores_the_tables_under_row_level_security():
    """Reversing 0012 creates the blob and write tables again as 0007 and 0008 left them:
    row-level security forced, the tenant policy, the trigger registering tenants (so the
    migrations before it can be reversed too)."""
    from tulip_memory.postgres.rls import POLICY_NAME

    tables = ["tulip_memory_langgraph_blob", "tulip_memory_langgraph_write"]
    _migrate(BEFORE)
    with connections["owner"].cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "(SELECT array_agg(p.polname) FROM pg_policy p WHERE p.polrelid = c.oid), "
            "(SELECT array_agg(t.tgname) FROM pg_trigger t WHERE t.tgrelid = c.oid "
            "AND NOT t.tgisinternal) FROM pg_class c WHERE c.relname = ANY(%s) ORDER BY 1",
            [tables],
        )
        found = cursor.fetchall()
    assert found == [(t, True, True, [POLICY_NAME], ["tulip_register_tenant"]) for t in tables]
    # The application role sees no other tenant's rows there.
    with tenant_atomic("globex"), connections["default"].cursor() as cursor:
        cursor.execute(
            "INSERT INTO tulip_memory_langgraph_blob (tenant, thread_id, checkpoint_ns, "
            "channel, version, parent_version, base_version, depth, type, data) "
            "VALUES ('globex', 't', '', 'c', 'v1', '', 'v1', 0, 'empty', NULL)"
        )
    with tenant_atomic("acme"), connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM tulip_memory_langgraph_blob")
        assert cursor.fetchone() == (0,)
    _migrate("0007_langgraph")  # past 0008: its triggers are there to drop


def test_0017_gives_the_stored_rows_version_1_and_the_saver_goes_on():
    """Back to 0016 and forward again (on Citus, on the distributed table): every row
    reads as before, and a saver that wrote them goes on from them (a delta when its
    parent's row is as it wrote it, whole when its version differs)."""
    from tulip_memory.models import LangGraphCheckpoint

    saver, reference = DjangoSaver(tenant="acme"), InMemorySaver()
    config = {"configurable": {"thread_id": "counted"}}
    graph, expected = build_agent(saver), build_agent(reference)
    for agent in (graph, expected):
        agent.invoke(user_turn(0), config)
    stored = saver.get_tuple(config)
    _migrate("0016_pin_security_definer_functions")
    _migrate("0017_langgraph_checkpoint_version")
    with tenant_atomic("acme"):
        versions = LangGraphCheckpoint.rows.filter(thread_id="counted").values_list("version")
        assert set(versions) == {(1,)}
    assert DjangoSaver(tenant="acme").get_tuple(config) == stored
    for agent in (graph, expected):
        agent.invoke(user_turn(1), config)
    found = DjangoSaver(tenant="acme").get_tuple(config).checkpoint["channel_values"]
    assert found["messages"] == expected.get_state(config).values["messages"]
