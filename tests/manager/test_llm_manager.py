"""LLMMemoryManager with the LLM extractor, through the manager's own entry points, against
the chat-server TEST DOUBLE of tests/llm/chat_server.py (a local HTTP server speaking the
chat-completions protocol; no model runs here).

Which extractor a manager uses (settings, arguments), the events of a run (usage, operation
counts) and of each failure (timeout, 5xx, 429 after the retries, malformed output: the
reason, nothing applied), the debug line per call, the dry-run ``extract``, and one
transaction per run on PgMemory.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.llm.chat_server import Reply
from tests.llm.conftest import make_client
from tests.manager.conftest import manager_events
from tests.manager.consolidation_helpers import (
    MODEL_FAILURES,
    PREFIX,
    conversation,
    decisions,
    facts,
    failed_requests,
    state,
)
from tulip_memory.events import memory_event
from tulip_memory.manager import LLMExtractor, LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.consolidation import JOURNAL_LABEL
from tulip_memory.manager.factory import build_memory_manager_from_settings
from tulip_memory.state import AgentState
from tulip_memory.store import InMemoryStore


def _llm_settings(server, **options):
    return {"BASE_URL": server.url, "MODEL": "test-model", "RETRY_BACKOFF": 0.01, **options}


def _manager(server, store=None, **client_options) -> LLMMemoryManager:
    return LLMMemoryManager(
        store if store is not None else InMemoryStore(),
        namespace_prefix=PREFIX,
        extractor=LLMExtractor(make_client(server, **client_options)),
    )


# --- which extractor -------------------------------------------------------------------------


def test_a_configured_model_selects_the_llm_extractor(server, settings):
    settings.TULIP_MEMORY = {"LLM": _llm_settings(server)}
    manager = LLMMemoryManager(InMemoryStore())
    assert isinstance(manager.extractor, LLMExtractor)
    assert manager.extractor.config.base_url == server.url
    assert manager.extractor.config.model == "test-model"


def test_without_a_model_the_heuristic_is_used(server, settings):
    settings.TULIP_MEMORY = {"LLM": {"BASE_URL": server.url}}  # no MODEL
    assert LLMMemoryManager(InMemoryStore()).extractor is None
    settings.TULIP_MEMORY = {}
    assert LLMMemoryManager(InMemoryStore()).extractor is None


async def test_the_heuristic_manager_still_extracts_offline(settings, sent_events):
    settings.TULIP_MEMORY = {}
    manager = LLMMemoryManager(InMemoryStore(), namespace_prefix=PREFIX)
    await manager.on_session_end(AgentState(messages=conversation("I'm a nurse in Leeds.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["memory_count"] >= 1
    assert "llm_calls" not in payload  # no model, no usage fields


def test_extract_fn_or_celery_mode_take_no_extractor_from_settings(server, settings):
    settings.TULIP_MEMORY = {"LLM": _llm_settings(server)}

    async def mine(messages):
        return []

    assert LLMMemoryManager(InMemoryStore(), extract_fn=mine).extractor is None
    # The caller of the Celery mode extracts nothing: the workers build their own.
    assert LLMMemoryManager(InMemoryStore(), extract_mode="celery").extractor is None


def test_bad_extractor_arguments_are_refused(server):
    extractor = LLMExtractor(make_client(server))

    async def mine(messages):
        return []

    with pytest.raises(ValueError, match="extractor must be an LLMExtractor"):
        LLMMemoryManager(InMemoryStore(), extractor=mine)
    with pytest.raises(ValueError, match="extract_fn or extractor, not both"):
        LLMMemoryManager(InMemoryStore(), extract_fn=mine, extractor=extractor)
    with pytest.raises(ValueError, match="TULIP_MEMORY\\['LLM'\\]"):
        LLMMemoryManager(InMemoryStore(), extractor=extractor, extract_mode="celery")


def test_malformed_llm_settings_fail_the_construction(settings):
    settings.TULIP_MEMORY = {"LLM": {"MODEL": "m", "TIMEOUT": -1}}
    with pytest.raises(ValueError, match="TIMEOUT"):
        LLMMemoryManager(InMemoryStore())


def test_workers_build_the_same_extractor(server, settings):
    settings.TULIP_MEMORY = {
        "STORE": "tulip_memory.store.InMemoryStore",
        "LLM": _llm_settings(server),
    }
    manager = build_memory_manager_from_settings()
    assert isinstance(manager.extractor, LLMExtractor) and manager.extract_mode == "inline"
    settings.TULIP_MEMORY = {"STORE": "tulip_memory.store.InMemoryStore"}
    assert build_memory_manager_from_settings().extractor is None  # rebuilt: the heuristic


# --- a run through the manager -------------------------------------------------------------


async def test_session_end_applies_the_decisions_and_reports_the_usage(server, sent_events, caplog):
    manager = _manager(server)
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    server.add(
        facts(
            ("user", "role", "The user is a surgeon."), ("user", "city", "The user lives in Oslo.")
        ),
        decisions((0, "UPDATE", "user", "role", "The user is a surgeon."), (1, "ADD")),
    )
    with caplog.at_level(logging.DEBUG, logger="tulip_memory.llm"):
        await manager.on_session_end(
            AgentState(messages=conversation("I'm a surgeon in Oslo now."))
        )
    assert await state(manager) == {
        ("user", "role"): "The user is a surgeon.",
        ("user", "city"): "The user lives in Oslo.",
    }
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted"
    assert payload["llm_calls"] == len(server.requests) == 2
    assert payload["model"] == "test-model" and payload["tokens_estimated"] is False
    assert payload["llm_failed_requests"] == 0
    assert payload["prompt_tokens"] > 0 and payload["completion_tokens"] > 0
    assert payload["operations"] == {"ADD": 1, "UPDATE": 1, "DELETE": 0, "NONE": 0}
    assert payload["memory_count"] == 2 and sorted(payload["types"]) == ["user", "user"]
    assert payload["namespace"] == list(PREFIX) and payload["mode"] == "inline"
    # One debug line per call, with its tokens, without content.
    calls = [r.getMessage() for r in caplog.records if r.getMessage().startswith("llm call ")]
    assert len(calls) == 2 and all("prompt_tokens=" in line for line in calls)
    assert not any("Oslo" in line for line in calls)


async def test_the_same_run_again_costs_and_applies_nothing(server, sent_events):
    manager = _manager(server)
    server.add(facts(("user", "name", "The user's name is Ada.")))
    state_ = AgentState(messages=conversation("I'm Ada."))
    await manager.on_session_end(state_)
    await manager.on_session_end(state_)
    first, second = (payload for _, payload in manager_events(sent_events))
    assert first["llm_calls"] == 1 and second["llm_calls"] == 0
    assert second["already_done"] is True and second["memory_count"] == 0
    assert len(server.requests) == 1


async def test_background_mode_reports_like_inline(server, sent_events):
    manager = LLMMemoryManager(
        InMemoryStore(),
        namespace_prefix=PREFIX,
        extractor=LLMExtractor(make_client(server)),
        extract_mode="background",
    )
    server.add(facts(("user", "timezone", "The user's time zone is CET.")))
    await manager.on_session_end(AgentState(messages=conversation("My time zone is CET.")))
    await manager.drain()
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["mode"] == "background"
    assert payload["llm_calls"] == 1
    assert await state(manager) == {("user", "timezone"): "The user's time zone is CET."}


async def test_extract_is_a_dry_run(server):
    manager = _manager(server)
    server.add(facts(("project", "deadline", "The project is due on 1 March.")))
    memories = await manager.extract(conversation("We ship on 1 March."))
    assert [(m.type, m.key) for m in memories] == [(MemoryType.PROJECT, "deadline")]
    assert await state(manager) == {}
    assert await manager.store.list_keys((*PREFIX, JOURNAL_LABEL)) == []


# --- failures through the manager ----------------------------------------------------------


@pytest.mark.parametrize("case", list(MODEL_FAILURES), ids=list(MODEL_FAILURES))
async def test_a_failing_model_is_reported_and_applies_nothing(server, sent_events, case):
    options, replies, reason = MODEL_FAILURES[case]
    manager = _manager(server, **options)
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    before = await state(manager)
    # The facts answer arrives; the decision call is the one that fails: the run has
    # spent tokens already and must still apply nothing.
    server.add(facts(("user", "role", "The user is a surgeon.")), *replies)
    await manager.on_session_end(AgentState(messages=conversation("I'm a surgeon now.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extract_failed"
    assert payload["reason"] == reason and payload["error_type"] == "LLMError"
    assert payload["namespace"] == list(PREFIX) and payload["mode"] == "inline"
    assert payload["llm_calls"] >= 1 and payload["prompt_tokens"] > 0  # the facts call counted
    assert payload["llm_failed_requests"] == failed_requests(replies, reason)
    assert await state(manager) == before
    assert len(await manager.history(MemoryType.USER, "role")) == 1
    assert await manager.store.list_keys((*PREFIX, JOURNAL_LABEL)) == []


async def test_a_500_then_success_applies_once(server, sent_events):
    manager = _manager(server, MAX_RETRIES=2)
    server.add(Reply(status=500), facts(("user", "name", "The user's name is Ada.")))
    await manager.on_session_end(AgentState(messages=conversation("I'm Ada.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["llm_calls"] == 1
    assert payload["llm_failed_requests"] == 1
    assert await state(manager) == {("user", "name"): "The user's name is Ada."}


async def test_a_malformed_answer_then_a_repaired_one_is_applied(server, sent_events):
    manager = _manager(server)
    server.add(
        Reply(content='{"facts": [{"type": "user", "key": "name"'),  # cut off
        facts(("user", "name", "The user's name is Ada.")),
    )
    await manager.on_session_end(AgentState(messages=conversation("I'm Ada.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["llm_calls"] == 2
    assert "not valid JSON" in server.requests[1].prompt_text  # the repair request
    assert await state(manager) == {("user", "name"): "The user's name is Ada."}


async def test_unknown_keys_in_an_answer_are_refused_and_logged(server, sent_events, caplog):
    manager = _manager(server)
    bad = {"facts": [{"type": "user", "key": "k", "content": "c", "confidence": 1, "x": 1}]}
    server.add(bad, bad)
    with caplog.at_level(logging.DEBUG, logger="tulip_memory.llm"):
        await manager.on_session_end(AgentState(messages=conversation("I'm Ada.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extract_failed" and payload["reason"] == "malformed_output"
    # The parse problem (it may quote the answer) is logged at DEBUG, never in the event.
    assert payload["error"] == (
        "LLMError: the chat model failed (malformed_output); its message is logged at DEBUG level"
    )
    assert "unknown fields" not in payload["error"]
    unusable = [r for r in caplog.records if "unusable after one repair" in r.getMessage()]
    assert unusable and {r.levelname for r in unusable} == {"DEBUG"}
    assert await state(manager) == {}


# --- one transaction per run on PgMemory ----------------------------------------------------


def _failing_delete_pgmemory():
    from tulip_memory.store import PgMemory

    class FailingDeletePgMemory(PgMemory):
        """A real PgMemory whose deletes of memories fail (the database went away mid-run)."""

        async def delete(self, namespace, key):
            if namespace[-1] in {t.value for t in MemoryType}:
                raise ConnectionError("database went away")
            return await super().delete(namespace, key)

    return FailingDeletePgMemory()


@pytest.mark.django_db(transaction=True)
async def test_on_pgmemory_a_run_is_one_transaction(server, sent_events):
    store = _failing_delete_pgmemory()
    manager = _manager(server, store=store)
    await manager.save(
        [
            Memory(MemoryType.USER, "role", "The user is a nurse."),
            Memory(MemoryType.USER, "employer", "The user works at St. Mary's."),
        ]
    )
    before = await state(manager)
    server.add(
        facts(("user", "role", "The user is a surgeon."), ("user", "city", "Oslo.")),
        decisions(
            (0, "UPDATE", "user", "role", "The user is a surgeon."),
            (0, "DELETE", "user", "employer", None),
        ),
    )
    await manager.on_session_end(AgentState(messages=conversation("Surgeon now, left St. Mary's.")))
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extract_failed" and payload["reason"] == "exception"
    # The UPDATE, the ADD, the history entry and the journal were in the failed
    # transaction: nothing of the run is there.
    assert await state(manager) == before
    assert len(await manager.history(MemoryType.USER, "role")) == 1
    assert await store.list_keys((*PREFIX, JOURNAL_LABEL)) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["inline", "background"])
async def test_on_pgmemory_a_whole_run_commits(server, sent_events, mode):
    from tulip_memory.store import PgMemory

    manager = LLMMemoryManager(
        PgMemory(),
        namespace_prefix=PREFIX,
        extractor=LLMExtractor(make_client(server)),
        extract_mode=mode,
    )
    await manager.save([Memory(MemoryType.USER, "employer", "The user works at St. Mary's.")])
    server.add(
        facts(("user", "employer", "The user left St. Mary's.")),
        decisions((0, "DELETE", "user", "employer", None)),
    )
    await manager.on_session_end(AgentState(messages=conversation("I left St. Mary's.")))
    await manager.drain()
    ((name, payload),) = manager_events(sent_events)
    assert name == "memory.manager.extracted" and payload["operations"]["DELETE"] == 1
    assert payload["mode"] == mode
    assert await state(manager) == {}
    (ended,) = await manager.history(MemoryType.USER, "employer")
    assert ended.valid_to is not None
    assert (await manager.store.get((*PREFIX, JOURNAL_LABEL), payload["run_id"]))["state"] == "done"


# --- the example of docs/manager.md ---------------------------------------------------------


def test_the_docs_example_runs_against_a_local_server(server, settings, capsys):
    """The complete example of docs/manager.md, run as written against the test double
    (only BASE_URL differs from the documented settings)."""
    docs = (Path(__file__).resolve().parents[2] / "docs" / "manager.md").read_text()
    block = docs.split("<!-- llm-example -->\n```python\n", 1)[1].split("```", 1)[0]
    settings.TULIP_MEMORY = {
        "LLM": {"BASE_URL": server.url, "MODEL": "qwen2.5:7b-instruct", "API_KEY_ENV": None}
    }
    postgres = "The project uses PostgreSQL (moved from MySQL)."
    server.add(
        facts(
            ("user", "role", "The user is a data engineer at Acme."),
            ("project", "database", "The project uses MySQL."),
        ),
        facts(("project", "database", postgres)),
        decisions((0, "UPDATE", "project", "database", postgres)),
    )
    namespace: dict = {"__name__": "__main__"}
    try:
        exec(compile(block, "docs/manager.md", "exec"), namespace)
    finally:
        memory_event.disconnect(namespace["show"])
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert (
        lines[0]
        == "memory.manager.extracted {'ADD': 2, 'UPDATE': 0, 'DELETE': 0, 'NONE': 0} 1 None"
    )
    assert (
        lines[1]
        == "memory.manager.extracted {'ADD': 0, 'UPDATE': 1, 'DELETE': 0, 'NONE': 0} 2 None"
    )
    assert sorted(lines[2:4]) == [
        f"project/database: {postgres}",
        "user/role: The user is a data engineer at Acme.",
    ]
    assert lines[4].startswith("database: The project uses MySQL. until 20")
    assert lines[5] == f"database: {postgres} until now"
    assert len(server.requests) == 3
    assert all(r.body["model"] == "qwen2.5:7b-instruct" for r in server.requests)


@pytest.mark.django_db(transaction=True)
def test_on_pgmemory_sync_code_gets_the_run_inside_its_own_transaction(server, sent_events):
    """A sync view calling ``async_to_sync(manager.on_session_end)`` inside its own
    ``transaction.atomic()``: the run joins that transaction (and goes if it rolls back)."""
    from asgiref.sync import async_to_sync
    from django.db import transaction

    from tulip_memory.store import PgMemory

    manager = _manager(server, store=PgMemory())
    server.add(facts(("user", "name", "The user's name is Ada.")))
    with pytest.raises(RuntimeError), transaction.atomic():
        async_to_sync(manager.on_session_end)(AgentState(messages=conversation("I'm Ada.")))
        assert async_to_sync(state)(manager) == {("user", "name"): "The user's name is Ada."}
        raise RuntimeError("the view fails after the session ended")
    assert [name for name, _ in manager_events(sent_events)] == ["memory.manager.extracted"]
    assert async_to_sync(state)(manager) == {}
    assert async_to_sync(manager.store.list_keys)((*PREFIX, JOURNAL_LABEL)) == []
