"""The playground's pages: pick a user of a tenant, chat, end the session, start another.

Every page shows what the memory layer did for the current session: the memory block
recalled at its start, the messages the sliding window kept for the agent, the checkpoint
saved after the last turn, the extraction job of the ended session and the memories now
stored. The users are demo personas (no login): picking one binds its tenant for the
memory layer, the way ``TenantMiddleware`` binds a signed-in user's tenant in a real site.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from example_project.playground import agent
from example_project.playground.runtime import extract_mode, outcomes, run, runtime
from tulip_memory.conf import settings
from tulip_memory.core.namespaces import encode_namespace
from tulip_memory.exceptions import LLMError
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob
from tulip_memory.models.extraction import OPEN_STATES
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic

#: The demo's tenants and their users.
PERSONAS: dict[str, tuple[str, ...]] = {"acme": ("ada", "bob"), "globex": ("carol",)}
SYSTEM_PROMPT = "You are a helpful assistant. Use what you remember about the user."
MAX_MESSAGE_CHARS = 4000
SESSION_KEY = "playground"


@dataclass
class Visit:
    """What the browser's session says: who is chatting, in which thread."""

    tenant: str
    user: str
    thread: str | None = None
    session_no: int = 0
    ended: list[str] = field(default_factory=list)

    @property
    def namespace(self) -> tuple[str, str, str]:
        return (self.tenant, "users", self.user)

    def save(self, request: HttpRequest) -> None:
        request.session[SESSION_KEY] = self.__dict__.copy()


class BadInput(Exception):
    """What the user sent cannot be used; the message says why."""


def _visit(request: HttpRequest) -> Visit | None:
    data = request.session.get(SESSION_KEY)
    if not isinstance(data, dict):
        return None
    visit = Visit(**data)
    if visit.user not in PERSONAS.get(visit.tenant, ()):
        return None  # a persona that no longer exists
    return visit


def _persona(tenant: str, user: str) -> tuple[str, str]:
    if tenant not in PERSONAS:
        raise BadInput(f"Unknown tenant {tenant!r}; pick one of {', '.join(PERSONAS)}.")
    if user not in PERSONAS[tenant]:
        raise BadInput(f"Unknown user {user!r} of tenant {tenant!r}.")
    return tenant, user


def _own_thread(visit: Visit, thread: str) -> str:
    if not visit.thread or thread != visit.thread:
        raise BadInput(
            f"Thread {thread!r} is not {visit.user}'s current session: start a session "
            "and write there."
        )
    return thread


# --- pages --------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def pick(request: HttpRequest) -> HttpResponse:
    error = ""
    if request.method == "POST":
        try:
            tenant, user = _persona(request.POST.get("tenant", ""), request.POST.get("user", ""))
        except BadInput as exc:
            error = str(exc)
        else:
            previous = _visit(request)
            if previous is not None:
                _close_session(previous)
            Visit(tenant, user).save(request)
            return redirect("playground:chat")
    return render(
        request,
        "playground/pick.html",
        {"personas": PERSONAS, "error": error, "mode": extract_mode()},
        status=400 if error else 200,
    )


def chat(request: HttpRequest, error: str = "", status: int = 200) -> HttpResponse:
    visit = _visit(request)
    if visit is None:
        return redirect("playground:pick")
    context = _panels(visit)
    context["error"] = error
    return render(request, "playground/chat.html", context, status=status)


@require_POST
def start(request: HttpRequest) -> HttpResponse:
    visit = _visit(request)
    if visit is None:
        return redirect("playground:pick")
    _close_session(visit)
    visit.session_no += 1
    visit.thread = f"{visit.user}-{uuid.uuid4().hex[:12]}"
    visit.save(request)
    return redirect("playground:chat")


@require_POST
def say(request: HttpRequest) -> HttpResponse:
    visit = _visit(request)
    if visit is None:
        return redirect("playground:pick")
    text = request.POST.get("text", "").strip()
    try:
        thread = _own_thread(visit, request.POST.get("thread", ""))
        if not text:
            raise BadInput("Type a message first.")
        if len(text) > MAX_MESSAGE_CHARS:
            raise BadInput(f"A message may have at most {MAX_MESSAGE_CHARS} characters.")
        run(visit.tenant, lambda: _turn(visit, thread, text))
    except BadInput as exc:
        return chat(request, str(exc), status=400)
    except LLMError as exc:  # the turn's checkpoint is saved only after an answer
        return chat(
            request,
            f"The chat model did not answer ({exc}); your message was not added.",
            status=502,
        )
    return redirect("playground:chat")


@require_POST
def end(request: HttpRequest) -> HttpResponse:
    visit = _visit(request)
    if visit is None:
        return redirect("playground:pick")
    try:
        thread = _own_thread(visit, request.POST.get("thread", ""))
        ended = run(visit.tenant, lambda: _end(visit, thread))
    except BadInput as exc:
        return chat(request, str(exc), status=400)
    if not ended:
        return chat(request, "Nothing to remember yet: say something first.", status=400)
    visit.ended.append(thread)
    visit.thread = None
    visit.save(request)
    return redirect("playground:chat")


def _close_session(visit: Visit) -> None:
    """End ``visit``'s open session, if any, as the End button does: picking another user
    or starting a new session does not lose what the open one said."""
    if not visit.thread:
        return
    thread = visit.thread
    if run(visit.tenant, lambda: _end(visit, thread)):
        visit.ended.append(thread)
    visit.thread = None


# --- the memory layer's work -----------------------------------------------------------------


async def _turn(visit: Visit, thread: str, text: str) -> None:
    rt = runtime()
    manager = rt.manager()
    state = await rt.checkpointer.load(thread)
    if state is None:  # the session's first message: recall at session start
        fresh = AgentState(
            messages=[Message(Role.SYSTEM, SYSTEM_PROMPT), Message(Role.USER, text)],
            # The subject tag: forget_subject then erases the conversation with the memories.
            metadata={"user": visit.user, settings.SUBJECT_METADATA_KEY: visit.user},
            thread_id=thread,
        )
        with manager.scoped(visit.namespace):
            state = await manager.on_session_start(fresh)
    else:
        state.messages.append(Message(Role.USER, text))
    kept = await rt.window.async_apply(state.messages)
    answer, by = await agent.reply(kept)
    state.messages.append(Message(Role.ASSISTANT, answer, metadata={"by": by}))
    await rt.checkpointer.save(state, thread)


async def _end(visit: Visit, thread: str) -> bool:
    rt = runtime()
    state = await rt.checkpointer.load(thread)
    if state is None:
        return False
    manager = rt.manager()
    if manager.extract_mode == "background":
        outcomes.started(visit.namespace)
    with manager.scoped(visit.namespace):
        await manager.on_session_end(state)
    return True


async def _snapshot(visit: Visit) -> dict[str, Any]:
    rt = runtime()
    manager = rt.manager()
    state = await rt.checkpointer.load(visit.thread) if visit.thread else None
    messages = state.messages if state else []
    kept = await rt.window.async_apply(messages) if messages else []
    checkpoint = stats = None
    if visit.thread and state is not None:
        newest = await rt.checkpointer.storage.list_checkpoints(visit.thread, 1)
        checkpoint = newest[0] if newest else None
        stats = await rt.checkpointer.get_storage_stats(visit.thread)
    with manager.scoped(visit.namespace):
        memories = await manager.retrieve()
    pending, last = outcomes.of(visit.namespace)  # this visitor's extractions (background)
    return {
        "messages": [m for m in messages if m.role is not Role.SYSTEM],
        "recalled": agent.memory_block(messages),
        "kept": kept,
        "dropped": len(messages) - len(kept),
        "checkpoint": checkpoint,
        "stats": stats,
        "memories": memories,
        "pending_here": pending,
        "last_extraction": last,
    }


def _jobs(visit: Visit) -> list[ExtractionJob]:
    with tenant_atomic(visit.tenant):
        return list(
            ExtractionJob.objects.filter(
                queue__namespace=encode_namespace(visit.namespace)
            ).order_by("-pk")[:3]
        )


def _panels(visit: Visit) -> dict[str, Any]:
    mode = extract_mode()
    # The jobs first: a job seen done has saved its memories before the snapshot reads them.
    jobs = _jobs(visit) if mode == "celery" else []
    snapshot = run(visit.tenant, lambda: _snapshot(visit))
    waiting = any(job.state in OPEN_STATES for job in jobs) or (
        mode == "background" and snapshot["pending_here"] > 0
    )
    return {
        "visit": visit,
        "mode": mode,
        "model": "the configured chat model" if agent.chat_model_configured() else "scripted",
        "jobs": jobs,
        "waiting": waiting,
        "window_size": runtime().window.window_size,
        **snapshot,
    }
