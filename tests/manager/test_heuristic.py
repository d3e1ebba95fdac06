"""The heuristic extractor: its labelled corpus, stable keys, determinism."""

from __future__ import annotations

import pytest

from tests.manager.heuristic_corpus import CORPUS, HELD_OUT, conversation, precision_recall
from tulip_memory.manager import LLMMemoryManager, MemoryType
from tulip_memory.manager.heuristic import extract_heuristic
from tulip_memory.messages import Message, Role
from tulip_memory.store.memory import InMemoryStore


def test_corpus_is_large_enough_and_has_positives_and_negatives():
    assert len(CORPUS) >= 200
    assert len(HELD_OUT) >= 60
    assert sum(1 for e in CORPUS if not e.expected) >= 40
    assert sum(1 for e in CORPUS if len(e.expected) >= 2) >= 15
    for memory_type in MemoryType:
        assert sum(1 for e in CORPUS if memory_type in e.expected) >= 25


@pytest.mark.parametrize("memory_type", list(MemoryType))
def test_precision_and_recall_per_type_on_the_corpus(memory_type):
    precision, recall, *_ = precision_recall(CORPUS)[memory_type]
    assert precision >= 0.9, f"{memory_type}: precision {precision:.2f}"
    assert recall >= 0.9, f"{memory_type}: recall {recall:.2f}"


def test_a_greeting_with_a_name_gives_the_name():
    memories = extract_heuristic([Message(Role.USER, "Hi, I'm Ada.")])
    assert [(m.type, m.key, m.content) for m in memories] == [
        (MemoryType.USER, "name", "The user's name is Ada.")
    ]


def test_a_possessive_subject_before_the_deadline_still_dates_it():
    memories = extract_heuristic([Message(Role.USER, "Our project deadline is March 3rd.")])
    assert [(m.type, m.key, m.content) for m in memories] == [
        (MemoryType.PROJECT, "deadline", "Project: Our project deadline is March 3rd.")
    ]


def test_each_clause_of_a_compound_sentence_gives_its_fact():
    memories = extract_heuristic(
        [Message(Role.USER, "I prefer vegetarian food and my favourite editor is Vim.")]
    )
    assert [(m.type, m.key, m.content) for m in memories] == [
        (MemoryType.USER, "preference:vegetarian-food", "The user prefers vegetarian food."),
        (MemoryType.USER, "favorite:editor", "The user's favourite editor is Vim."),
    ]


def test_negatives_yield_nothing():
    negatives = [e for e in CORPUS if not e.expected]
    noisy = [e.text for e in negatives if extract_heuristic(conversation(e))]
    # The corpus labels two hard negatives the rules misread; nothing else may fire.
    assert set(noisy) <= {
        "We are using the meeting room at noon.",
        "I like how you explained that.",
    }


def test_same_fact_said_again_has_the_same_key():
    first = extract_heuristic(
        [Message(Role.USER, "Please always run the linter before committing!")]
    )
    again = extract_heuristic([Message(Role.USER, "always run the LINTER before committing.")])
    assert [m.key for m in first] == [m.key for m in again] == ["rule:run-linter-before-committing"]


async def test_a_changed_single_valued_fact_updates_one_record():
    store = InMemoryStore()
    manager = LLMMemoryManager(store, namespace_prefix=("acme", "u1"))
    for text in ("I'm a data scientist at Acme.", "I am a staff engineer at Globex."):
        memories = await manager.extract([Message(Role.USER, text)])
        await manager.save(memories)
    assert await store.list_keys(("acme", "u1", "user")) == ["role"]
    assert (await store.get(("acme", "u1", "user"), "role"))[
        "content"
    ] == "The user is a staff engineer at Globex."
    history = await manager.history(MemoryType.USER, "role")
    assert [v.content for v in history] == [
        "The user is a data scientist at Acme.",
        "The user is a staff engineer at Globex.",
    ]


def test_only_user_messages_are_mined_and_output_is_deterministic():
    conversation = [
        Message(Role.SYSTEM, "I am a helpful assistant."),
        Message(Role.ASSISTANT, "I prefer to answer briefly."),
        Message(Role.TOOL, "The deadline is tomorrow.", tool_call_id="t1"),
        Message(Role.USER, "My name is Ada. I live in Lyon. See https://example.com/spec."),
    ]
    first = extract_heuristic(conversation)
    assert [(m.type, m.key) for m in first] == [
        (MemoryType.USER, "name"),
        (MemoryType.USER, "location"),
        (MemoryType.REFERENCE, "url:example.com/spec"),
    ]
    assert extract_heuristic(conversation) == first
    assert all(m.metadata["source"] == "heuristic" and m.metadata["rule"] for m in first)


def test_confirmation_records_what_was_confirmed_and_needs_an_assistant_turn():
    memories = extract_heuristic(
        [
            Message(Role.ASSISTANT, "I used a single bulk insert. It is faster."),
            Message(Role.USER, "Exactly, keep doing that!"),
        ]
    )
    assert [(m.type, m.content) for m in memories] == [
        (MemoryType.FEEDBACK, "The user confirmed this approach: I used a single bulk insert.")
    ]
    assert extract_heuristic([Message(Role.USER, "Exactly, keep doing that!")]) == []


def test_last_statement_of_a_key_wins_within_one_conversation():
    memories = extract_heuristic(
        [Message(Role.USER, "I live in Lyon."), Message(Role.USER, "I live in Paris now.")]
    )
    assert [m.content for m in memories] == ["The user lives in Paris."]


def test_organisation_is_the_capitalised_words_only_and_verbs_need_not_touch_their_object():
    memories = extract_heuristic(
        [
            Message(Role.USER, "I am a staff engineer at Globex now."),
            Message(Role.USER, "We're migrating the pipeline to Polars."),
        ]
    )
    assert [(m.type, m.content) for m in memories] == [
        (MemoryType.USER, "The user is a staff engineer at Globex."),
        (MemoryType.PROJECT, "Project: We're migrating the pipeline to Polars."),
    ]
