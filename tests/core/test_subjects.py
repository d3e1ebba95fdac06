"""Subjects: reading the tag from metadata, and every checkpointer storing it on save."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.core.subjects import subject_namespace, subject_of
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.erasure import forget_subject
from tulip_memory.messages import Message, Role
from tulip_memory.models import CheckpointRecord, DeltaCheckpointRecord, LangGraphCheckpoint
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic


def test_the_tag_is_read_from_the_configured_key():
    assert subject_of({"subject": "alice"}) == "alice"
    assert subject_of({"subject": 42}) == "42"
    assert subject_of({}) == subject_of(None) == subject_of({"subject": None}) == ""
    with override_settings(TULIP_MEMORY={"SUBJECT_METADATA_KEY": "user_id"}):
        assert subject_of({"subject": "alice", "user_id": "u-7"}) == "u-7"
        assert subject_of({"subject": "alice"}) == ""


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (True, "must be a str, got bool"),
        ({"id": 1}, "must be a str, got dict"),
        ("   ", "must not be only whitespace"),
        ("", "must not be empty"),
        ("a" * 256, "256 characters long, over 255"),
    ],
)
def test_a_bad_tag_is_refused_naming_the_key(value, problem):
    with pytest.raises(ValueError, match=r"metadata\['subject'\] \(the thread's subject\) "):
        subject_of({"subject": value})
    with pytest.raises(ValueError, match=problem):
        subject_of({"subject": value})


def test_the_subject_namespace_follows_the_setting():
    assert subject_namespace("acme", "alice") == ("acme", "users", "alice")
    with override_settings(TULIP_MEMORY={"SUBJECT_NAMESPACE": ("people", "by-id")}):
        assert subject_namespace("acme", "42") == ("acme", "people", "by-id", "42")
    with override_settings(TULIP_MEMORY={"SUBJECT_NAMESPACE": ()}):
        assert subject_namespace("acme", "42") == ("acme", "42")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("users", r" must be a tuple of labels, e.g. \('users',\), got str 'users'"),
        (["users"], r" must be a tuple of labels, e.g. \('users',\), got list \['users'\]"),
        (("users", " "), r"\[1\] must not be only whitespace"),
    ],
)
def test_a_subject_namespace_that_is_not_a_tuple_of_labels_is_refused_not_split(value, problem):
    # A str used to be split into its letters: ("acme", "u", "s", "e", "r", "s", "alice").
    with override_settings(TULIP_MEMORY={"SUBJECT_NAMESPACE": value}):
        with pytest.raises(ValueError, match=r"^TULIP_MEMORY\['SUBJECT_NAMESPACE'\]" + problem):
            subject_namespace("acme", "alice")
        # Erasure refuses before its first query (this test may not touch the database),
        # instead of erasing nothing and storing a receipt of zeros.
        with pytest.raises(ValueError, match=r"^TULIP_MEMORY\['SUBJECT_NAMESPACE'\]"):
            forget_subject("acme", "alice")


def _plain(alias: str):
    return (PostgreSQLCheckpointer if alias == "default" else MySQLCheckpointer)(
        alias, tenant="acme"
    )


def _delta(alias: str):
    return DeltaCheckpointer(ORMDeltaStorage(alias, tenant="acme"), max_chain_depth=2)


def _subjects(alias: str, model) -> list[tuple[str, str]]:
    with tenant_atomic("acme", using=alias):
        rows = model.objects.using(alias).order_by("id").values_list("checkpoint_id", "subject")
        return list(rows)


@pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
@pytest.mark.parametrize("alias", ["default", "mysql"], ids=["postgresql", "mariadb"])
@pytest.mark.parametrize(
    ("build", "model"),
    [(_plain, CheckpointRecord), (_delta, DeltaCheckpointRecord)],
    ids=["plain", "delta"],
)
def test_checkpointers_store_the_tag_and_refuse_a_bad_one(alias, build, model):
    checkpointer = build(alias)
    save = async_to_sync(checkpointer.save)
    state = AgentState([Message(Role.USER, "hi")], metadata={"subject": "alice"})
    save(state, "t1", "c1")
    state.metadata["subject"] = 7
    save(state, "t1", "c2")
    save(AgentState([Message(Role.USER, "hi")]), "t2", "c3")
    with pytest.raises(ValueError, match=r"metadata\['subject'\].*must be a str, got list"):
        save(AgentState(metadata={"subject": ["alice"]}), "t1", "c4")
    assert _subjects(alias, model) == [("c1", "alice"), ("c2", "7"), ("c3", "")]


@pytest.mark.django_db(transaction=True)
def test_a_rebased_delta_chain_keeps_its_tag():
    checkpointer = _delta("default")
    state = AgentState(metadata={"subject": "alice"})
    for n in range(3):
        state.messages.append(Message(Role.USER, f"turn {n}"))
        async_to_sync(checkpointer.save)(state, "t1", f"c{n}")
    # Dropping the full root re-bases its deltas (rewritten rows): the tag stays.
    assert async_to_sync(checkpointer.prune)("t1", keep_last=2) == 1
    assert _subjects("default", DeltaCheckpointRecord) == [("c1", "alice"), ("c2", "alice")]


@pytest.mark.django_db(transaction=True)
def test_langgraph_checkpoints_take_the_tag_from_the_run_metadata():
    from tests.langgraph_agent import build_agent, user_turn
    from tulip_memory.langgraph import DjangoSaver

    agent = build_agent(DjangoSaver(tenant="acme"))
    agent.invoke(
        user_turn(0), {"configurable": {"thread_id": "g1"}, "metadata": {"subject": "alice"}}
    )
    agent.invoke(user_turn(0), {"configurable": {"thread_id": "g2"}})
    with tenant_atomic("acme"):
        tags = set(LangGraphCheckpoint.objects.values_list("thread_id", "subject"))
    assert tags == {("g1", "alice"), ("g2", "")}
