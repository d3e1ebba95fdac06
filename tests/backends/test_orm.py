"""PostgreSQL/MySQL checkpointers: vendor checks, tenants, and row-level security."""

from __future__ import annotations

import math

import pytest
from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections

from tests.backends.test_contract import make_state
from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tulip_memory.backends.base import encode_state
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.messages import Message, Role, ToolCall
from tulip_memory.state import AgentState
from tulip_memory.tenancy import tenant_atomic, tenant_context

BOTH = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])
# The two vendors' checkpointers, each on its database.
EACH_VENDOR = pytest.mark.parametrize(
    ("make", "alias"),
    [(PostgreSQLCheckpointer, "default"), (MySQLCheckpointer, "mysql")],
    ids=["postgresql", "mysql"],
)


def test_vendor_and_alias_are_checked():
    with pytest.raises(ConfigurationError, match=r"needs a postgresql database.*'mysql'"):
        PostgreSQLCheckpointer("mysql")
    with pytest.raises(ConfigurationError, match=r"needs a mysql database.*'default'"):
        MySQLCheckpointer("default")
    with pytest.raises(ConfigurationError, match="no database alias 'nope'"):
        PostgreSQLCheckpointer("nope")
    with pytest.raises(ValueError, match="using must be"):
        PostgreSQLCheckpointer("")
    with pytest.raises(ValueError, match="tenant"):
        PostgreSQLCheckpointer("default", tenant="")


@BOTH
@pytest.mark.parametrize(
    ("make", "alias"),
    [
        (PostgreSQLCheckpointer, "default"),
        (MySQLCheckpointer, "mysql"),
        (lambda alias, **kw: DeltaCheckpointer(ORMDeltaStorage(alias, **kw)), "default"),
        (lambda alias, **kw: DeltaCheckpointer(ORMDeltaStorage(alias, **kw)), "mysql"),
    ],
    ids=["postgresql", "mysql", "delta-postgresql", "delta-mysql"],
)
async def test_tenants_do_not_see_each_other(make, alias):
    tenant_a, tenant_b = make(alias, tenant="a"), make(alias, tenant="b")
    await tenant_a.save(make_state(1), "shared-thread", "cp")
    assert await tenant_b.load("shared-thread") is None
    assert await tenant_b.list_checkpoints("shared-thread") == []
    assert await tenant_b.delete("shared-thread") is False
    await tenant_b.save(make_state(2), "shared-thread", "cp")
    assert await tenant_a.load("shared-thread", "cp") == make_state(1)
    assert await tenant_b.load("shared-thread", "cp") == make_state(2)
    # The bound tenant is used when none is fixed.
    unbound = make(alias)
    with tenant_context("a"):
        assert await unbound.load("shared-thread") == make_state(1)
    with pytest.raises(TenantError, match="no tenant"):
        await unbound.load("shared-thread")


def _count_rows(alias: str, table: str) -> int:
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
        return cursor.fetchone()[0]


@BOTH
async def test_postgresql_rows_are_under_row_level_security():
    await PostgreSQLCheckpointer("default", tenant="a").save(make_state(1), "t")
    await DeltaCheckpointer(ORMDeltaStorage("default", tenant="a")).save(make_state(1), "t")
    tables = [
        "tulip_memory_checkpoint",
        "tulip_memory_delta_checkpoint",
        "tulip_memory_delta_block",
    ]

    def visible() -> dict[str, tuple[int, int]]:
        counts = {}
        for table in tables:
            with tenant_atomic("a"):
                own = _count_rows("default", table)
            with tenant_atomic("b"):
                other = _count_rows("default", table)
            counts[table] = (own, other)
        return counts

    assert await sync_to_async(visible)() == dict.fromkeys(tables, (1, 0))
    # Without a tenant pinned, the app role sees nothing at all.
    assert await sync_to_async(lambda: [_count_rows("default", t) for t in tables])() == [0, 0, 0]

    def forge() -> None:
        from tulip_memory.models import CheckpointRecord

        with tenant_atomic("b"):
            CheckpointRecord.objects.create(tenant="a", thread_id="t", checkpoint_id="x", state={})

    with pytest.raises(DatabaseError, match="row-level security"):
        await sync_to_async(forge)()


def _delta_on(alias: str, **kw):
    return DeltaCheckpointer(ORMDeltaStorage(alias, **kw))


@BOTH
@pytest.mark.parametrize(
    ("make", "alias"),
    [
        (PostgreSQLCheckpointer, "default"),
        (MySQLCheckpointer, "mysql"),
        (_delta_on, "default"),
        (_delta_on, "mysql"),
    ],
    ids=["postgresql", "mysql", "delta-postgresql", "delta-mysql"],
)
async def test_identifiers_compare_byte_exactly(make, alias):
    tenants = ["acme", "ACME", "acme ", "\uff41\uff43\uff4d\uff45"]  # the last is full-width "acme"
    for number, tenant in enumerate(tenants):
        await make(alias, tenant=tenant).save(make_state(number + 1), "t1", "cp")
    for number, tenant in enumerate(tenants):
        checkpointer = make(alias, tenant=tenant)
        assert await checkpointer.load("t1", "cp") == make_state(number + 1), tenant
        assert await checkpointer.list_checkpoints("t1") == ["cp"]
    acme = make(alias, tenant="acme")
    await acme.save(make_state(7), "T1", "CP")
    await acme.save(make_state(8), "t1", "cp ")
    assert await acme.load("t1", "cp") == make_state(1)
    assert await acme.load("T1") == make_state(7)
    assert await acme.load("t1", "cp ") == make_state(8)
    assert await acme.delete("T1") is True
    assert await acme.load("t1", "cp") == make_state(1)
    assert await make(alias, tenant="ACME").delete("t1") is True
    assert await acme.list_checkpoints("t1") == ["cp ", "cp"]


@BOTH
@pytest.mark.parametrize(
    ("make", "alias"),
    [
        (PostgreSQLCheckpointer, "default"),
        (MySQLCheckpointer, "mysql"),
        (_delta_on, "default"),
        (_delta_on, "mysql"),
    ],
    ids=["postgresql", "mysql", "delta-postgresql", "delta-mysql"],
)
async def test_a_fixed_tenant_other_than_the_bound_one_is_refused(make, alias):
    checkpointer = make(alias, tenant="a")
    await checkpointer.save(make_state(1), "t", "cp")
    with tenant_context("b"):
        for call in (
            lambda: checkpointer.save(make_state(2), "t", "cp"),
            lambda: checkpointer.load("t"),
            lambda: checkpointer.list_checkpoints("t"),
            lambda: checkpointer.delete("t"),
        ):
            with pytest.raises(TenantError, match=r"'a'.*'b'"):
                await call()
    with tenant_context("a"):
        assert await checkpointer.load("t") == make_state(1)
    assert await checkpointer.list_checkpoints("t") == ["cp"]


RESAVE_SCRIPT = """
import asyncio, sys, django
django.setup()
from tulip_memory.backends import MySQLCheckpointer, PostgreSQLCheckpointer
from tests.backends.test_contract import make_state
make = PostgreSQLCheckpointer if sys.argv[1] == "default" else MySQLCheckpointer
checkpointer = make(sys.argv[1], tenant="a")
async def main():
    for n in range(40):
        await checkpointer.save(make_state(n + 1), "t", "cp")
asyncio.run(main())
"""


@BOTH
@EACH_VENDOR
async def test_processes_resaving_one_explicit_id_keep_one_row(make, alias):
    import asyncio

    from tests.processes import run_python

    runs = await asyncio.gather(
        *(asyncio.to_thread(run_python, RESAVE_SCRIPT, alias) for _ in range(3))
    )
    assert [run.stderr[-2000:] for run in runs if run.returncode] == []
    checkpointer = make(alias, tenant="a")
    assert await checkpointer.list_checkpoints("t") == ["cp"]
    assert await checkpointer.load("t", "cp") == make_state(40)


def _set_state(model, alias: str, tenant: str, checkpoint_id: str, state) -> None:
    with tenant_atomic(tenant, using=alias):
        model.objects.using(alias).filter(checkpoint_id=checkpoint_id).update(state=state)


@BOTH
@EACH_VENDOR
@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ({"bogus": True}, "got a dict without one"),
        ({"messages": 5}, "got 'messages' of type int"),
        ([1, 2], "got a list"),
        ({"messages": [{"content": "no role"}]}, "needs a dict with a 'role'"),
    ],
    ids=["no-messages", "messages-not-a-list", "not-an-object", "bad-message"],
)
async def test_a_row_holding_no_state_raises_checkpoint_corrupt_error(make, alias, stored, problem):
    from tulip_memory.exceptions import CheckpointCorruptError
    from tulip_memory.models import CheckpointRecord

    checkpointer = make(alias, tenant="a")
    await checkpointer.save(make_state(1), "t", "older")
    await checkpointer.save(make_state(2), "t", "cp")
    await sync_to_async(_set_state)(CheckpointRecord, alias, "a", "cp", stored)
    for checkpoint_id in (None, "cp"):
        with pytest.raises(CheckpointCorruptError) as raised:
            await checkpointer.load("t", checkpoint_id)
        assert str(raised.value).startswith("checkpoint 'cp' of thread 't' cannot be read: ")
        assert problem in str(raised.value)
    assert await checkpointer.load("t", "older") == make_state(1)
    assert await checkpointer.list_checkpoints("t") == ["cp", "older"]
    assert await checkpointer.delete("t", "cp") is True
    assert await checkpointer.load("t") == make_state(1)


@BOTH
@EACH_VENDOR
@pytest.mark.parametrize(
    ("state", "where", "value"),
    [
        (AgentState(metadata={"score": math.nan}), "state.metadata.score", "nan"),
        (
            AgentState(metadata={"scores": [1.0, {"hi": math.inf}]}),
            "state.metadata.scores[1].hi",
            "inf",
        ),
        (
            AgentState(
                messages=[
                    Message(
                        Role.ASSISTANT,
                        "",
                        tool_calls=[ToolCall("c1", "f", {"low": -math.inf})],
                    )
                ]
            ),
            "state.messages[0].tool_calls[0].arguments.low",
            "-inf",
        ),
        (
            AgentState(messages=[Message(Role.USER, "q", metadata={"a b": math.nan})]),
            "state.messages[0].metadata['a b']",
            "nan",
        ),
    ],
    ids=["metadata", "nested", "tool-call", "message-metadata"],
)
async def test_nan_and_infinity_are_refused_by_name_and_nothing_is_lost(
    make, alias, state, where, value
):
    checkpointer = make(alias, tenant="a")
    await checkpointer.save(make_state(1), "t", "cp")
    for checkpoint_id in (None, "cp"):
        with pytest.raises(ValueError) as refused:
            await checkpointer.save(state, "t", checkpoint_id)
        assert str(refused.value).startswith(f"{where} is {value}, which {make.__name__} cannot")
        assert "DeltaCheckpointer(ORMDeltaStorage(...))" in str(refused.value)
    assert await checkpointer.list_checkpoints("t") == ["cp"]
    assert await checkpointer.load("t", "cp") == make_state(1)
    # The delta checkpointer on the same database stores such a state.
    delta = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="a"))
    await delta.save(state, "t", "cp")
    assert encode_state(await delta.load("t", "cp")) == encode_state(state)
