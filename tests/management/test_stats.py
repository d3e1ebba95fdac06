"""``manage.py tulip_memory_stats`` on PostgreSQL: figures per tenant, table and JSON."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command

from tests.langgraph_agent import build_agent, user_turn
from tulip_memory.backends.orm import ORMCheckpointer
from tulip_memory.delta import DeltaCheckpointer
from tulip_memory.delta.orm import ORMDeltaStorage
from tulip_memory.langgraph import DjangoSaver
from tulip_memory.manager.extraction.queue import CeleryExtractions
from tulip_memory.messages import Message, Role
from tulip_memory.state import AgentState
from tulip_memory.store import PgMemory


def stats(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_stats", *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.fixture
def rows():
    """Both tenants' rows; the number of checkpoints of acme's LangGraph thread."""
    store = PgMemory()
    user = ("acme", "users", "u1")
    for namespace, key, text in (
        ((*user, "user"), "location", "Lives in Berlin"),
        ((*user, "user"), "name", "Ada"),
        ((*user, "project"), "stack", "Django and PostgreSQL"),
        ((*user, "_history", "user", "location"), "v1", "Lives in Paris"),
        ((*user, "notes"), "blank", "?!"),  # no words: no vector
        (("globex", "users", "u2", "feedback"), "tone", "Be brief"),
    ):
        async_to_sync(store.put)(namespace, key, {"text": text})
    state = AgentState(messages=[Message(Role.USER, "hello " * 50)])
    async_to_sync(ORMCheckpointer("default", tenant="acme").save)(state, "t1")
    delta = DeltaCheckpointer(ORMDeltaStorage("default", tenant="acme"))
    async_to_sync(delta.save)(state, "t2")
    CeleryExtractions().enqueue(user, [Message(Role.USER, "I live in Berlin.")])
    # A LangGraph thread of one turn, and pending writes waiting for their checkpoint.
    saver = DjangoSaver(tenant="acme")
    build_agent(saver).invoke(user_turn(1), {"configurable": {"thread_id": "lg"}})
    early = {"thread_id": "lg-early", "checkpoint_ns": "", "checkpoint_id": "1f0-early"}
    saver.put_writes({"configurable": early}, [("messages", ["early"])], "task-1")
    return len(list(saver.list({"configurable": {"thread_id": "lg"}})))


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_json_has_the_figures_of_each_tenant(rows):
    figures = json.loads(stats("--tenant", "acme", "--tenant", "globex", "--json"))["tenants"]
    acme, globex = figures["acme"], figures["globex"]
    assert acme["store"] == {"items": 5, "history": 1}
    assert acme["memories"] == {"user": 2, "feedback": 0, "project": 1, "reference": 0}
    assert acme["checkpoints"]["plain"]["count"] == 1
    assert acme["checkpoints"]["plain"]["bytes"] > 0
    delta = acme["checkpoints"]["delta"]
    assert delta["count"] == 1 and delta["bytes"] > 0 and delta["blocks"] >= 1
    assert acme["jobs"] == {"pending": 1, "running": 0, "done": 0, "failed": 0}
    assert acme["embedding_sources"] == {"hrr": 4, "none": 1}
    assert globex["memories"]["feedback"] == 1 and globex["jobs"]["pending"] == 0
    assert globex["checkpoints"]["plain"] == {"count": 0, "bytes": 0}
    graph = acme["checkpoints"]["langgraph"]
    assert (graph["threads"], graph["count"], graph["pending_writes"]) == (2, rows, 1)
    assert rows > 1 and graph["bytes"] > 0
    assert globex["checkpoints"]["langgraph"] == {
        "threads": 0, "count": 0, "pending_writes": 0, "bytes": 0
    }  # fmt: skip
    # Through the tables' owner, which reads every tenant's store items: the same figures.
    through_owner = json.loads(
        stats("--tenant", "acme", "--tenant", "globex", "--json", "--database", "owner")
    )["tenants"]
    assert through_owner == figures


@pytest.mark.django_db(transaction=True)
def test_table_has_a_row_per_figure_and_a_column_per_tenant(rows):
    lines = stats("--tenant", "acme", "--tenant", "globex").splitlines()
    assert lines[0].split() == ["acme", "globex"]
    table = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert table["store.items"] == ["5", "1"]
    assert table["memories.user"] == ["2", "0"]
    assert table["jobs.pending"] == ["1", "0"]
    assert table["checkpoints.langgraph.count"] == [str(rows), "0"]
    assert table["embedding_sources.none"] == ["1", "0"]  # globex has no such source: 0


@pytest.mark.django_db(transaction=True)
def test_a_tenant_whose_rows_are_gone_has_zeros(rows):
    store = PgMemory()
    async_to_sync(store.put)(("initech", "n"), "k", {"v": 1})
    async_to_sync(store.delete)(("initech", "n"), "k")
    figures = json.loads(stats("--tenant", "initech", "--json"))["tenants"]["initech"]
    assert figures["store"] == {"items": 0, "history": 0}
    assert figures["embedding_sources"] == {}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Name the tenants with --tenant"),
        (("--tenant", " "), "Tenant ' ' is not valid"),
        (("--tenant", "acme", "--database", "mysql"), "mysql; this command works on"),
        (("--tenant", "acme", "--dry-run"), "unrecognized arguments: --dry-run"),
    ],
)
def test_bad_input_is_refused(args, message):
    with pytest.raises(CommandError, match=message):
        stats(*args)


@pytest.mark.django_db(transaction=True)
def test_a_tenant_never_written_is_refused_by_name(rows):
    with pytest.raises(CommandError) as raised:
        stats("--tenant", "acme", "--tenant", "acem")
    message = str(raised.value)
    assert message.startswith(
        "Unknown tenant(s) 'acem' on database 'default': no row of theirs was ever written (known: "
    )
    assert "'acme'" in message and "'globex'" in message
