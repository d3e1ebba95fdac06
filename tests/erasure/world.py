"""A tenant's data about several subjects, written through the real layers, and row counts.

:func:`populate` writes, for ``alice`` and ``bob`` of a tenant on a database alias:
memories with a past version (the memory manager over PgMemory on PostgreSQL; the same
rows through the ORM on MariaDB, where PgMemory does not run), extraction jobs of their
namespaces, plain and delta checkpoints of threads tagged with them (bob's delta thread
starts with the same messages as alice's, so it has a block of the same digest), an
untagged thread and, on PostgreSQL, LangGraph threads. :func:`rows` counts every table.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from asgiref.sync import async_to_sync
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
    from tulip_memory.langgraph import DjangoSaver
    from tulip_memory.testing.langgraph_agent import build_agent, user_turn

    agent = build_agent(DjangoSaver(tenant=tenant))
    for subject, turns in (("alice", 2), ("bob", 1)):
        config = {
            "configurable": {"thread_id": f"{subject}-graph"},
            "metadata": {"subject": subject},
        }
        for turn in range(turns):
            agent.invoke(user_turn(turn), config)


def populate(alias: str, tenant: str) -> None:
    for subject in ("alice", "bob"):
        _memories(alias, tenant, subject)
        _jobs(alias, tenant, (tenant, "users", subject), 2 if subject == "alice" else 1)
    _checkpoints(alias, tenant)
    if _is_pg(alias):
        _graphs(tenant)


THREAD_MODELS = {
    "checkpoints": CheckpointRecord,
    "delta_checkpoints": DeltaCheckpointRecord,
    "delta_blocks": DeltaBlock,
    "langgraph_checkpoints": LangGraphCheckpoint,
}


def rows(alias: str, tenant: str) -> dict[str, list]:
    """Every row of ``tenant`` in the tables erasure touches, comparable between calls.

    Items as (namespace, key); jobs as (namespace, sequence, state, holds the
    conversation); checkpoint tables as one thread id per row; receipts as their counts.
    """
    found: dict[str, list] = {}
    with tenant_atomic(tenant, using=alias):
        found["items"] = sorted(
            MemoryItem.objects.using(alias).filter(tenant=tenant).values_list("namespace", "key")
        )
        jobs = ExtractionJob.objects.using(alias).filter(tenant=tenant).select_related("queue")
        found["jobs"] = sorted(
            (job.queue.namespace, job.sequence, job.state, "Berlin" in json.dumps(job.payload))
            for job in jobs
        )
        for name, model in THREAD_MODELS.items():
            if name.startswith("langgraph") and not _is_pg(alias):
                continue
            queryset = model.objects.using(alias).filter(tenant=tenant)
            found[name] = sorted(queryset.values_list("thread_id", flat=True))
        receipts = ErasureReceipt.objects.using(alias).filter(tenant=tenant).order_by("id")
        found["receipts"] = [receipt.counts for receipt in receipts]
    return found
