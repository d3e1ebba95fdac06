"""A tenant's data about several subjects, written through the real layers, and its rows.

:func:`populate` writes, for ``alice`` and ``bob`` of a tenant on a database alias:
memories with a past version (the memory manager over PgMemory on PostgreSQL; the same
rows through the ORM on MariaDB, where PgMemory does not run), extraction jobs of their
namespaces, plain and delta checkpoints of threads tagged with them (bob's delta thread
starts with the same messages as alice's, so it has a block of the same digest), an
untagged thread and, on PostgreSQL, LangGraph threads (and rows holding only pending
writes). :func:`rows` reads every row of a tenant in every table of the app.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import connections

from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.core.namespaces import encode_namespace
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.models import (
    CheckpointRecord,
    DeltaBlock,
    DeltaCheckpointRecord,
    ErasureReceipt,
    ExtractionJob,
    ExtractionQueue,
    LangGraphCheckpoint,
    MemoryItem,
    Tenant,
)
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic

CONVERSATION = "I live in Berlin and I drink green tea."


def _is_pg(alias: str) -> bool:
    return connections[alias].vendor == "postgresql"


def _memories(alias: str, tenant: str, subject: str) -> None:
    """Two memories under (tenant, users, subject), one of them updated once (a version)."""
    if _is_pg(alias):
        from tulip_memory.store import PgMemory

        manager = LLMMemoryManager(PgMemory(alias))

        async def save() -> None:
            with manager.scoped((tenant, "users", subject)):
                await manager.save([Memory(MemoryType.USER, "city", "Berlin")])
                await manager.save([Memory(MemoryType.USER, "tea", "green")])
                await manager.save([Memory(MemoryType.USER, "city", "Paris")])

        async_to_sync(save)()
        return
    now = datetime.now(UTC)
    rows = [
        ((tenant, "users", subject, "user"), "city", "Paris"),
        ((tenant, "users", subject, "user"), "tea", "green"),
        ((tenant, "users", subject, "_history", "user", "city"), "v1", "Berlin"),
    ]
    with tenant_atomic(tenant, using=alias):
        for namespace, key, content in rows:
            MemoryItem.objects.using(alias).create(
                tenant=tenant,
                namespace=encode_namespace(namespace),
                key=key,
                value={"content": content},
                created_at=now,
                updated_at=now,
            )


def _jobs(alias: str, tenant: str, namespace: tuple[str, ...], count: int) -> None:
    payload = {"messages": [Message(Role.USER, CONVERSATION).to_dict()]}
    with tenant_atomic(tenant, using=alias):
        if _is_pg(alias):
            for _ in range(count):
                ExtractionJob.objects.using(alias).enqueue(namespace, payload)
            return
        queue = ExtractionQueue.objects.using(alias).create(
            tenant=tenant, namespace=encode_namespace(namespace), last_sequence=count
        )
        for sequence in range(1, count + 1):
            ExtractionJob.objects.using(alias).create(
                queue=queue, tenant=tenant, sequence=sequence, payload=payload
            )


def _checkpoints(alias: str, tenant: str) -> None:
    plain_class = PostgreSQLCheckpointer if _is_pg(alias) else MySQLCheckpointer
    plain = plain_class(alias, tenant=tenant)
    delta = DeltaCheckpointer(ORMDeltaStorage(alias, tenant=tenant), max_chain_depth=2)

    async def save() -> None:
        for subject, saves in (("alice", 2), ("bob", 1)):
            state = AgentState(metadata={"subject": subject})
            for n in range(saves):
                state.messages.append(Message(Role.USER, f"{subject} says {n}"))
                await plain.save(state, f"{subject}-plain")
        await plain.save(AgentState([Message(Role.USER, "nobody")]), "untagged-plain")
        for subject, saves in (("alice", 4), ("bob", 2)):
            state = AgentState(messages=[Message(Role.USER, CONVERSATION)])
            state.metadata["subject"] = subject
            for n in range(saves):
                state.messages.append(Message(Role.ASSISTANT, f"noted {n}"))
                await delta.save(state, f"{subject}-delta")

    async_to_sync(save)()


def _graphs(tenant: str) -> None:
    from tests.langgraph_agent import build_agent, user_turn
    from tulip_memory.langgraph import DjangoSaver

    agent = build_agent(DjangoSaver(tenant=tenant))
    for subject, turns in (("alice", 2), ("bob", 1)):
        config = {
            "configurable": {"thread_id": f"{subject}-graph"},
            "metadata": {"subject": subject},
        }
        for turn in range(turns):
            agent.invoke(user_turn(turn), config)
    # Pending writes that came before their checkpoint (LangGraph may send them first):
    # rows holding only them, on a thread of their own (tagged by the run's subject) and
    # on the subject's graph thread (a later checkpoint's, untagged).
    saver = DjangoSaver(tenant=tenant)
    for subject in ("alice", "bob"):
        for thread, metadata in (("pending", {"subject": subject}), ("graph", {})):
            configurable = {"thread_id": f"{subject}-{thread}", "checkpoint_id": "f-pending"}
            saver.put_writes(
                {"configurable": configurable, "metadata": metadata},
                [("messages", [f"{subject}: {CONVERSATION}"])],
                "task-pending",
            )


def populate(alias: str, tenant: str) -> None:
    for subject in ("alice", "bob"):
        _memories(alias, tenant, subject)
        _jobs(alias, tenant, (tenant, "users", subject), 2 if subject == "alice" else 1)
    _checkpoints(alias, tenant)
    if _is_pg(alias):
        _graphs(tenant)


# The tables of thread rows: every row of a thread tagged with the subject goes.
THREAD_TABLES = tuple(
    model._meta.db_table
    for model in (CheckpointRecord, DeltaCheckpointRecord, DeltaBlock, LangGraphCheckpoint)
)
ITEMS = MemoryItem._meta.db_table
QUEUES = ExtractionQueue._meta.db_table
JOBS = ExtractionJob._meta.db_table
RECEIPTS = ErasureReceipt._meta.db_table


def _plain(value: Any) -> Any:
    """A column's value, comparable (bytes for a binary column, a list for a vector)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def rows(alias: str, tenant: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of ``tenant`` in every table of the app, every column, by table:
    comparable between calls. Read through the base managers, which hide no row (the
    LangGraph table's default manager hides rows holding only pending writes)."""
    found: dict[str, list[dict[str, Any]]] = {}
    tables = set(connections[alias].introspection.table_names())
    with tenant_atomic(tenant, using=alias):
        for model in apps.get_app_config("tulip_memory").get_models():
            if model._meta.db_table not in tables:  # the LangGraph tables: PostgreSQL's
                continue
            every = model._base_manager.using(alias)
            of_tenant = every.filter(pk=tenant) if model is Tenant else every.filter(tenant=tenant)
            fields = [field.attname for field in model._meta.concrete_fields]
            found[model._meta.db_table] = sorted(
                ({name: _plain(value) for name, value in row.items()}
                 for row in of_tenant.values(*fields)),
                key=repr,
            )  # fmt: skip
    return found


def items(found: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str]]:
    """The store items of ``found`` (:func:`rows`) as (namespace, key)."""
    return sorted((row["namespace"], row["key"]) for row in found[ITEMS])


def receipts(found: dict[str, list[dict[str, Any]]]) -> list[dict[str, int]]:
    """The counts of the receipts of ``found`` (:func:`rows`), oldest first."""
    return [row["counts"] for row in sorted(found[RECEIPTS], key=lambda row: row["id"])]
