"""LLMExtractor end to end against the chat-server TEST DOUBLE (tests/llm/chat_server.py)
and an InMemoryStore: what is sent to the model, what the store and its history hold after
each decision, refusals, redaction, the budget cut, failures and redelivered runs."""

from __future__ import annotations

import json
import logging

import pytest

from tests.llm.chat_server import Reply
from tests.llm.conftest import make_client
from tests.llm.redaction_corpus import KEY_SESSION, key_material_in
from tests.manager.consolidation_helpers import PREFIX, conversation, decisions, facts, state
from tulip_memory.exceptions import LLMError
from tulip_memory.manager import LLMMemoryManager, Memory, MemoryType
from tulip_memory.manager.consolidation import (
    DECISIONS_SCHEMA,
    FACTS_SCHEMA,
    JOURNAL_LABEL,
    LLMExtractor,
)
from tulip_memory.messages import Message, Role
from tulip_memory.store import InMemoryStore


@pytest.fixture
def manager():
    return LLMMemoryManager(InMemoryStore(), namespace_prefix=PREFIX)


@pytest.fixture
def extractor(server):
    return LLMExtractor(make_client(server))


async def test_add_into_an_empty_scope(server, manager, extractor):
    server.add(facts(("user", "role", "The user is a data engineer at Acme.")))
    report = await extractor.run(conversation("I'm a data engineer at Acme."), manager)
    assert [(o.event, o.type.value, o.key) for o in report.applied] == [("ADD", "user", "role")]
    assert await state(manager) == {("user", "role"): "The user is a data engineer at Acme."}
    # Nothing related exists: one model call, no decision call.
    (request,) = server.requests
    assert request.body["model"] == "test-model"
    assert request.body["response_format"]["json_schema"]["schema"] == FACTS_SCHEMA
    assert "user: I'm a data engineer at Acme." in request.prompt_text
    stored = await manager.store.get((*PREFIX, "user"), "role")
    assert stored["metadata"]["source"] == "llm" and stored["metadata"]["confidence"] == 0.9
    assert report.usage.calls == 1 and report.usage.prompt_tokens > 0


async def test_update_keeps_the_old_version_in_history(server, manager, extractor):
    await manager.save([Memory(MemoryType.USER, "role", "The user is a software engineer.")])
    server.add(
        facts(("user", "role", "The user is now a data scientist.")),
        decisions((0, "UPDATE", "user", "role", "The user is a data scientist (was an engineer).")),
    )
    report = await extractor.run(
        conversation("I switched jobs, I'm a data scientist now."), manager
    )
    assert [o.event for o in report.applied] == ["UPDATE"]
    assert await state(manager) == {
        ("user", "role"): "The user is a data scientist (was an engineer)."
    }
    versions = await manager.history(MemoryType.USER, "role")
    assert [v.content for v in versions] == [
        "The user is a software engineer.",
        "The user is a data scientist (was an engineer).",
    ]
    assert versions[0].valid_to is not None and versions[1].valid_to is None
    ask = server.requests[1]
    assert ask.body["response_format"]["json_schema"]["schema"] == DECISIONS_SCHEMA
    shown = json.loads(ask.body["messages"][-1]["content"])["facts"][0]
    assert shown["content"] == "The user is now a data scientist."
    assert {"type": "user", "key": "role", "content": "The user is a software engineer."} in (
        shown["existing"]
    )


async def test_delete_ends_the_memory_in_history(server, manager, extractor):
    await manager.save([Memory(MemoryType.PROJECT, "database", "The project uses MySQL.")])
    server.add(
        facts(("project", "storage", "The project keeps its data in files, no database.")),
        decisions((0, "ADD"), (0, "DELETE", "project", "database", None)),
    )
    report = await extractor.run(
        conversation("We dropped MySQL; data lives in files now."), manager
    )
    assert sorted(o.event for o in report.applied) == ["ADD", "DELETE"]
    assert await state(manager) == {
        ("project", "storage"): "The project keeps its data in files, no database."
    }
    (ended,) = await manager.history(MemoryType.PROJECT, "database")
    assert ended.content == "The project uses MySQL." and ended.valid_to is not None
    entries = await manager.store.search((*PREFIX, "_history", "project", "database"))
    assert entries[0].value["ended"] is True


async def test_none_changes_nothing(server, manager, extractor):
    await manager.save([Memory(MemoryType.USER, "language", "The user prefers Python.")])
    before = await manager.store.get_item((*PREFIX, "user"), "language")
    server.add(
        facts(("user", "language", "The user likes Python best.")),
        decisions((0, "NONE")),
    )
    report = await extractor.run(conversation("Python is my favourite."), manager)
    assert [o.event for o in report.operations] == ["NONE"] and report.applied == []
    after = await manager.store.get_item((*PREFIX, "user"), "language")
    assert after.version == before.version


async def test_an_event_in_another_case_is_taken(server, manager, extractor):
    await manager.save([Memory(MemoryType.USER, "city", "The user lives in Berlin.")])
    server.add(
        facts(("user", "city", "The user lives in Paris."), ("user", "pet", "The user has a cat.")),
        decisions((0, " update ", "user", "city", "The user lives in Paris."), (1, "add")),
    )
    report = await extractor.run(conversation("I moved to Paris with my cat."), manager)
    assert sorted(o.event for o in report.operations) == ["ADD", "UPDATE"]
    assert await state(manager) == {
        ("user", "city"): "The user lives in Paris.",
        ("user", "pet"): "The user has a cat.",
    }


async def test_a_run_without_facts(server, manager, extractor):
    server.add(facts())
    report = await extractor.run(conversation("What time is it?", "It is noon."), manager)
    assert report.operations == [] and await state(manager) == {}
    assert len(server.requests) == 1


async def test_a_run_without_conversation_asks_nothing(server, manager, extractor):
    messages = [Message(Role.SYSTEM, "You are helpful."), Message(Role.USER, "   ")]
    report = await extractor.run(messages, manager)
    assert report.operations == [] and server.requests == []


async def test_duplicates_within_one_run(server, manager, extractor):
    server.add(
        facts(
            ("user", "location", "The user lives in Berlin."),
            ("user", "location", "The user lives in Oslo."),
            ("user", "location", "The user lives in Oslo."),
        )
    )
    report = await extractor.run(conversation("Berlin... no, I moved to Oslo."), manager)
    assert len(report.operations) == 1
    assert await state(manager) == {("user", "location"): "The user lives in Oslo."}


async def test_a_contradiction_of_another_memory(server, manager, extractor):
    await manager.save([Memory(MemoryType.USER, "pets", "The user has a cat.")])
    server.add(
        facts(("user", "allergy", "The user is allergic to cats and has no pets.")),
        decisions((0, "ADD"), (0, "DELETE", "user", "pets", None)),
    )
    await extractor.run(conversation("I'm allergic to cats, I gave mine away."), manager)
    assert await state(manager) == {
        ("user", "allergy"): "The user is allergic to cats and has no pets."
    }
    assert [v.content for v in await manager.history(MemoryType.USER, "pets")] == [
        "The user has a cat."
    ]


async def test_unknown_types_keys_and_events_are_refused_and_logged(
    server, manager, extractor, caplog
):
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    server.add(
        facts(
            ("hobby", "chess", "The user plays chess."),
            ("user", "", "Empty key."),
            ("user", "role", "The user is a surgeon."),
            ("user", "age", "The user is 40.", 1.5),
            ("user", "mood", "The user is tired.", 0.2),  # below MIN_CONFIDENCE: dropped
            ("user", "city", "The user lives in Ber\x00lin."),
        ),
        decisions(
            (0, "UPDATE", "user", "name", "The user is Sam."),  # not shown for that fact
            (0, "MERGE"),
            (7, "ADD"),
        ),
    )
    with caplog.at_level(logging.DEBUG, logger="tulip_memory.manager"):
        report = await extractor.run(conversation("I'm a surgeon now."), manager)
    assert report.refused == 7
    # At WARNING, the refusals in words of ours, with the run and its tenant; what the
    # model wrote (it may quote the conversation) at DEBUG only.
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    refusals = [line for line in warned if "refused" in line]
    assert len(refusals) == 7 and all("of tenant 'acme': refused" in x for x in refusals)
    for reason, said in [
        ("facts[5] has a NUL character in its content", None),
        ("facts[0] has an unknown type", "'hobby'"),
        ("facts[1] has an invalid key", None),
        ("facts[3] has a confidence not in [0, 1]", "1.5"),
        ("decisions[0]: UPDATE of a memory not shown for fact 0", "'user'/'name'"),
        ("decisions[1] has an unknown event", "'MERGE'"),
        ("decisions[2] names the unknown fact 7", None),
    ]:
        assert any(line.endswith(f"refused {reason}") for line in refusals), reason
        if said is not None:
            assert any(f"refused {reason}: " in x and said in x for x in debug), reason
    assert any("no usable decision for fact 0 (a user memory)" in line for line in warned)
    assert any("fact 0 without a decision has the key 'role'" in line for line in debug)
    for model_said in ("hobby", "MERGE", "'name'", "1.5", "role"):
        assert not [line for line in warned if model_said in line], model_said
    assert await state(manager) == {("user", "role"): "The user is a nurse."}


async def test_an_answer_is_bounded_and_facts_of_redacted_secrets_are_refused(
    server, manager, caplog
):
    """MAX_FACTS facts of one answer at most, MAX_FACT_CHARS characters per content, and no
    memory holding a redaction's replacement (from a fact or an UPDATE decision)."""
    extractor = LLMExtractor(make_client(server, MAX_FACTS=4, MAX_FACT_CHARS=60))
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    server.add(
        facts(
            ("user", "password", "The user's password is [REDACTED:password]."),
            ("user", "bio", "The user " + "really " * 20 + "likes tea."),
            ("user", "role", "The user is a surgeon."),
            ("user", "city", "The user lives in Lyon."),
            ("user", "pet", "The user has a dog."),  # the fifth: over MAX_FACTS
            ("user", "food", "The user likes pho."),
        ),
        decisions(
            (0, "UPDATE", "user", "role", "The user [REDACTED:password] is a surgeon."),
            (1, "ADD"),
        ),
    )
    with caplog.at_level(logging.WARNING, logger="tulip_memory.manager"):
        report = await extractor.run(conversation("My password is hunter2 ..."), manager)
    assert report.refused == 5
    assert "facts[0] holds the redacted text [REDACTED:password]" in caplog.text
    assert "facts[1] has 159 characters of content, over MAX_FACT_CHARS 60" in caplog.text
    assert "refused facts[4:], the answer held 6 facts, over MAX_FACTS 4" in caplog.text
    assert "the UPDATE's content holds the redacted text [REDACTED:password]" in caplog.text
    assert await state(manager) == {
        ("user", "role"): "The user is a nurse.",
        ("user", "city"): "The user lives in Lyon.",
    }


async def test_a_redelivered_run_applies_nothing_twice(server, manager, extractor):
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    messages = conversation("I became a surgeon.")
    server.add(
        facts(("user", "role", "The user is a surgeon.")),
        decisions((0, "UPDATE", "user", "role", "The user is a surgeon.")),
    )
    first = await extractor.run(messages, manager)
    item = await manager.store.get_item((*PREFIX, "user"), "role")
    second = await extractor.run(messages, manager)
    assert second.already_done and second.run_id == first.run_id and second.applied == []
    assert len(server.requests) == 2  # the model is not asked again
    assert (await manager.store.get_item((*PREFIX, "user"), "role")).version == item.version
    assert len(await manager.history(MemoryType.USER, "role")) == 2


async def test_an_explicit_run_id_identifies_the_run(server, manager, extractor):
    server.add(facts(("user", "name", "The user's name is Ada.")))
    await extractor.run(conversation("I'm Ada."), manager, run_id="job-17")
    assert await manager.store.get((*PREFIX, JOURNAL_LABEL), "job-17") is not None
    again = await extractor.run(conversation("I'm Ada!"), manager, run_id="job-17")
    assert again.already_done and len(server.requests) == 1


class FailingDeleteStore(InMemoryStore):
    """A real InMemoryStore whose next delete of a memory fails once (a crash mid-apply)."""

    fail_next_delete = True

    async def delete(self, namespace, key):
        if self.fail_next_delete and namespace[-1] in {t.value for t in MemoryType}:
            self.fail_next_delete = False
            raise ConnectionError("store went away")
        return await super().delete(namespace, key)


async def test_a_run_that_stopped_half_way_is_replayed_without_the_model(server, extractor):
    manager = LLMMemoryManager(FailingDeleteStore(), namespace_prefix=PREFIX)
    await manager.save(
        [
            Memory(MemoryType.USER, "role", "The user is a nurse."),
            Memory(MemoryType.USER, "employer", "The user works at St. Mary's."),
        ]
    )
    messages = conversation("I'm a surgeon now, I left St. Mary's.")
    server.add(
        facts(("user", "role", "The user is a surgeon.")),
        decisions(
            (0, "UPDATE", "user", "role", "The user is a surgeon."),
            (0, "DELETE", "user", "employer", None),
        ),
    )
    with pytest.raises(ConnectionError):
        await extractor.run(messages, manager)
    assert (await state(manager))[("user", "role")] == "The user is a surgeon."
    replay = await extractor.run(messages, manager)
    assert [o.event for o in replay.applied] == ["DELETE"]  # the UPDATE is not applied twice
    assert len(server.requests) == 2
    assert await state(manager) == {("user", "role"): "The user is a surgeon."}
    assert len(await manager.history(MemoryType.USER, "role")) == 2
    assert len(await manager.history(MemoryType.USER, "employer")) == 1


async def test_a_failing_model_leaves_the_store_untouched(server, manager):
    extractor = LLMExtractor(make_client(server, MAX_RETRIES=1))
    await manager.save([Memory(MemoryType.USER, "role", "The user is a nurse.")])
    server.add(
        facts(("user", "role", "The user is a surgeon.")), Reply(status=500), Reply(status=500)
    )
    with pytest.raises(LLMError) as caught:
        await extractor.run(conversation("I'm a surgeon."), manager)
    assert caught.value.kind == "server_error"
    assert await state(manager) == {("user", "role"): "The user is a nurse."}
    assert await manager.store.list_keys((*PREFIX, JOURNAL_LABEL)) == []


async def test_secrets_reach_neither_the_model_nor_the_store(server, manager, extractor):
    server.add(
        facts(
            ("project", "deploy_key", "The deploy key is AKIAIOSFODNN7EXAMPLE."),
            ("user", "password_hunter2", "The user's password is hunter2."),
            ("reference", "sk-proj-Xa81bC92dE03fG14hI25jK36lM47nO58", "A key."),
        )
    )
    messages = conversation(
        "My password is hunter2 and our AWS key is AKIAIOSFODNN7EXAMPLE.", "Noted."
    )
    await extractor.run(messages, manager)
    sent = server.requests[0].prompt_text
    assert "hunter2" not in sent and "AKIAIOSFODNN7EXAMPLE" not in sent
    assert "[REDACTED:password]" in sent and "[REDACTED:api_key]" in sent
    everything = json.dumps(list((await state(manager)).items()))
    assert "hunter2" not in everything and "AKIAIOSFODNN7EXAMPLE" not in everything
    assert ("project", "deploy_key") in await state(manager)
    assert ("reference", "sk-proj-Xa81bC92dE03fG14hI25jK36lM47nO58") not in await state(manager)


async def test_a_key_longer_than_the_tool_cut_never_reaches_the_model(server, manager, extractor):
    """A private key a tool read (and passed to another tool) is redacted before the tool
    result and arguments are cut to 200 characters: none of it is sent."""
    server.add(facts())
    report = await extractor.run(KEY_SESSION, manager)
    (request,) = server.requests
    sent = request.prompt_text
    assert key_material_in(sent) == []
    assert "tool read_file -> [REDACTED:private_key]" in sent
    assert 'write_file(path="/srv/id_rsa", content="[REDACTED:private_key]")' in sent
    assert report.applied == [] and await state(manager) == {}


async def test_a_long_run_is_cut_to_the_budget(server, manager, caplog):
    extractor = LLMExtractor(make_client(server, INPUT_TOKEN_BUDGET=600))
    turns = [f"message number {i} " + "blah " * 60 for i in range(12)]
    server.add(facts())
    with caplog.at_level(logging.INFO, logger="tulip_memory.llm"):
        report = await extractor.run(conversation(*turns), manager)
    sent = server.requests[0].prompt_text
    assert "message number 11" in sent and "message number 0 " not in sent
    assert report.dropped_messages > 0
    assert f"dropped {report.dropped_messages} of 12 messages (indexes 0-" in caplog.text
