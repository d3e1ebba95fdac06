"""Demo scene: long-term memory across sessions, on PgMemory (tenant ``demo``).

Ada tells the agent who she is in one session; the extractor turns that into typed
memories (offline, the heuristic; a chat model when ``TULIP_MEMORY["LLM"]`` names one, and
the scene says how to switch it on); the next session starts with a memory block recalled
for her message. Her role changes and the history keeps what it said before. Then the
Celery mode: three sessions of two users become job rows, which a worker runs in order per
namespace (the worker code is called in this process here; ``celery -A example_project
worker -Q tulip_memory`` does it in production).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, TextIO

from asgiref.sync import sync_to_async

from tulip_memory.events import memory_event
from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState

ADA = ("demo", "users", "ada")


async def _clear(store: Any, prefix: tuple[str, ...]) -> None:
    for namespace in await store.list_namespaces(prefix, limit=1000):
        await store.clear_namespace(namespace)


def _last_job_id() -> int:
    """The newest job id of tenant ``demo`` (the demo database keeps earlier runs' jobs)."""
    from django.db.models import Max

    from tulip_memory.models import ExtractionJob
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("demo"):
        return ExtractionJob.objects.aggregate(last=Max("pk"))["last"] or 0


@contextlib.contextmanager
def _demo_queue() -> Iterator[None]:
    """Send the demo's run messages to a queue of the demo's own, emptied afterwards.

    The demo runs the worker code itself: messages on the real queue would stay behind for
    a worker to find later (and run jobs already done, to no effect). For the same reason a
    broker that does not answer changes nothing here: the warning that a job's message
    could not be sent (and that the sweep will send it) is held back.
    """
    from celery import current_app
    from django.conf import settings
    from django.test import override_settings

    queue = "tulip_memory_demo"
    sending = logging.getLogger("tulip_memory.manager.extraction")
    level = sending.level
    sending.setLevel(logging.ERROR)
    with override_settings(TULIP_MEMORY={**settings.TULIP_MEMORY, "CELERY_QUEUE": queue}):
        try:
            yield
        finally:
            sending.setLevel(level)
            try:
                with current_app.connection_for_write() as connection:
                    connection.default_channel.queue_purge(queue)
            except Exception:  # the broker may be down: then nothing was queued
                pass


def _run_jobs(
    namespaces: list[tuple[str, ...]], after_job_id: int
) -> list[tuple[str, int, str, int]]:
    from tulip_memory.core.namespaces import encode_namespace
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.models import ExtractionJob, ExtractionQueue
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("demo"):
        paths = [encode_namespace(ns) for ns in namespaces]
        queue_ids = list(
            ExtractionQueue.objects.filter(namespace__in=paths).values_list("pk", flat=True)
        )
    for queue_id in queue_ids:
        run_queue("demo", queue_id, owner="demo-worker")
    with tenant_atomic("demo"):
        return list(
            ExtractionJob.objects.filter(queue_id__in=queue_ids, pk__gt=after_job_id)
            .order_by("queue__namespace", "sequence")
            .values_list("queue__namespace", "sequence", "state", "attempts")
        )


def _event_line(event: str, payload: dict[str, Any]) -> str:
    """``memory.manager.extracted (5 memories)``: an event and how many memories it moved."""
    count = payload.get("memory_count")
    if count is None:
        return event
    return f"{event} ({count} {'memory' if count == 1 else 'memories'})"


async def manager_scene(out: TextIO) -> None:
    from tulip_memory.store import PgMemory

    store = PgMemory()
    await _clear(store, ("demo", "users"))
    events: list[str] = []

    def on_event(sender: Any, event: str, payload: dict[str, Any], **kwargs: Any) -> None:
        if event.startswith("memory.manager."):
            events.append(_event_line(event, payload))

    memory_event.connect(on_event, weak=False)
    try:
        manager = LLMMemoryManager(
            store,
            namespace_prefix=("demo", "anonymous"),
            namespace_resolver=lambda run: (
                ("demo", "users", run.metadata["user"]) if run.metadata.get("user") else None
            ),
        )
        first = AgentState(
            messages=[
                Message(Role.SYSTEM, "You are a coding assistant."),
                Message(
                    Role.USER,
                    "I'm a data scientist at Acme. I prefer short answers with code first.",
                ),
                Message(Role.ASSISTANT, "Got it. I used pandas for the join."),
                Message(
                    Role.USER, "Exactly. We're migrating the pipeline to Polars; see PROJ-812."
                ),
            ],
            metadata={"user": "ada"},
        )
        if manager.extractor is None:
            extractor = "the heuristic extractor"
            out.write(
                "Extractor: the offline heuristic. To let a chat model decide (ADD/UPDATE/DELETE "
                'with history), set TULIP_MEMORY["LLM"] = {"BASE_URL": ..., "MODEL": ...} '
                "(docs/manager.md).\n"
            )
        else:
            config = manager.extractor.config
            extractor = f"the chat model {config.model}"
            out.write(f"Extractor: the chat model {config.model} at {config.base_url}.\n")
        await manager.on_session_end(first)
        out.write(f"Session 1 ended; {extractor} kept:\n")
        with manager.scoped(ADA):
            for memory in await manager.retrieve():
                out.write(f"  [{memory.type.value:9}] {memory.key:42} {memory.content}\n")

        second = AgentState(
            messages=[
                Message(Role.SYSTEM, "You are a coding assistant."),
                Message(Role.USER, "How do I speed up the Polars join?"),
            ],
            metadata={"user": "ada"},
        )
        started = await manager.on_session_start(second)
        out.write("\nSession 2 starts; the memory block injected after the system prompt:\n")
        for line in started.messages[1].content.splitlines():
            out.write(f"  | {line}\n")
        anonymous = await manager.on_session_start(AgentState(messages=[Message(Role.USER, "hi")]))
        out.write(
            "An anonymous run (the resolver returns None) gets "
            f"{len(anonymous.messages) - 1} memory block(s).\n"
        )

        await manager.on_session_end(
            AgentState(
                messages=[Message(Role.USER, "I am a staff engineer at Globex now.")],
                metadata={"user": "ada"},
            )
        )
        with manager.scoped(ADA):
            out.write("\nHer role changed; its history:\n")
            for version in await manager.history(MemoryType.USER, "role"):
                until = version.valid_to.strftime("%H:%M:%S.%f") if version.valid_to else "now"
                out.write(f"  {version.valid_from:%H:%M:%S.%f} -> {until:15} {version.content}\n")

        celery = LLMMemoryManager(
            store, namespace_prefix=("demo", "anonymous"), extract_mode="celery"
        )
        sessions = [
            ("ada", "I live in Lyon."),
            ("bob", "I'm a nurse."),
            ("ada", "I live in Paris now."),
        ]
        after_job_id = await sync_to_async(_last_job_id)()
        with _demo_queue():
            for user, text in sessions:
                with celery.scoped(("demo", "users", user)):
                    await celery.on_session_end(AgentState(messages=[Message(Role.USER, text)]))
        out.write(
            f"\nCelery mode: {len(sessions)} sessions recorded as jobs "
            f"({celery.pending_extractions} pending);\n"
        )
        rows = await sync_to_async(_run_jobs)(
            [("demo", "users", "ada"), ("demo", "users", "bob")], after_job_id
        )
        out.write("the worker code (run in this process here) runs them in order per namespace:\n")
        for namespace, sequence, state, attempts in rows:
            out.write(f"  {namespace:16} #{sequence}  {state:7} attempts={attempts}\n")
        with manager.scoped(ADA):
            location = [m.content for m in await manager.retrieve() if m.key == "location"]
        out.write(f"Ada's location after both jobs, in order: {location[0]}\n")
        out.write("\nThe manager's events, in order:\n" + "".join(f"  {e}\n" for e in events))
    finally:
        memory_event.disconnect(on_event)
