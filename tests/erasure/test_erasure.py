"""forget_subject end to end on PostgreSQL (app role, row-level security) and MariaDB.

Each test writes two tenants' data about alice and bob through the real layers
(tests/erasure/world.py), erases one subject of one tenant and compares every row of both
tenants, in every table of the app and every column, before and after.
"""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from tests.erasure.world import (
    ITEMS,
    JOBS,
    QUEUES,
    RECEIPTS,
    THREAD_TABLES,
    items,
    populate,
    receipts,
    rows,
)
from tests.lock_waits import waiting_for_locks
from tests.threads import OnItsOwnConnections
from tulip_memory.delta import DeltaCheckpointer, ORMDeltaStorage
from tulip_memory.erasure import ERASED_PAYLOAD, aforget_subject, forget_subject
from tulip_memory.events import EV_STORE_SUBJECT_FORGOTTEN
from tulip_memory.exceptions import ConfigurationError, TenantError
from tulip_memory.models import (
    CheckpointRecord,
    DeltaBlock,
    ErasureReceipt,
    LangGraphCheckpoint,
    subject_reference,
)
from tulip_memory.tenancy import tenant_atomic, tenant_context
from tulip_memory.tenancy.cluster import is_citus

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "mysql"])

BOTH = pytest.mark.parametrize("alias", ["default", "mysql"], ids=["postgresql", "mariadb"])


@pytest.fixture
def world(request):
    """alice's and bob's data in tenants acme and globex, on the test's alias."""
    callspec = getattr(request.node, "callspec", None)
    alias = callspec.params.get("alias", "default") if callspec else "default"
    for tenant in ("acme", "globex"):
        populate(alias, tenant)
    return alias


ERASED_QUEUE = re.compile(r"acme/_erased/[0-9a-f]{32}")


def _erased_queues(found: dict[str, list]) -> dict[str, list]:
    """``found`` with each erased queue's random path as ``acme/_erased/*``."""
    queues = [
        {**row, "namespace": "acme/_erased/*"} if ERASED_QUEUE.fullmatch(row["namespace"]) else row
        for row in found[QUEUES]
    ]
    return {**found, QUEUES: sorted(queues, key=repr)}


def _without(found: dict[str, list], subject: str) -> dict[str, list]:
    """``found`` as erasing ``subject`` leaves it: no memory under its namespace, no row
    of its threads, its jobs' conversation erased and its name out of their queues'
    paths; every other row as it was."""
    namespace = f"acme/users/{subject}"
    queues = {row["id"] for row in found[QUEUES] if row["namespace"] == namespace}
    kept = dict(found)
    kept[ITEMS] = [row for row in found[ITEMS] if not row["namespace"].startswith(f"{namespace}/")]
    kept[QUEUES] = [
        {**row, "namespace": "acme/_erased/*"} if row["id"] in queues else row
        for row in found[QUEUES]
    ]
    kept[JOBS] = [
        {**row, "payload": ERASED_PAYLOAD} if row["queue_id"] in queues else row
        for row in found[JOBS]
    ]
    for table in THREAD_TABLES:
        if table in found:
            kept[table] = [
                row for row in found[table] if not row["thread_id"].startswith(f"{subject}-")
            ]
    return {table: sorted(rows_, key=repr) for table, rows_ in kept.items()}


def _thread_rows(found: dict[str, list], model, thread: str) -> int:
    return sum(row["thread_id"] == thread for row in found[model._meta.db_table])


def _digests(alias: str) -> dict[str, set[str]]:
    """acme's delta blocks: thread -> digests."""
    found: dict[str, set[str]] = {}
    with tenant_atomic("acme", using=alias):
        blocks = DeltaBlock.objects.using(alias).filter(tenant="acme")
        for thread, digest in blocks.values_list("thread_id", "digest"):
            found.setdefault(thread, set()).add(digest)
    return found


@BOTH
def test_forgets_the_subject_and_keeps_everything_else(alias, world, sent_events):
    before = {tenant: rows(alias, tenant) for tenant in ("acme", "globex")}
    before_digests = _digests(alias)
    report = forget_subject("acme", "alice", actor="dpo@acme", using=alias)

    after = rows(alias, "acme")
    expected = _without(before["acme"], "alice")
    expected[RECEIPTS] = after[RECEIPTS]
    assert receipts(after) == [report.counts]
    assert _erased_queues(after) == expected
    assert not any("alice" in row["namespace"] for row in after[QUEUES])
    assert rows(alias, "globex") == before["globex"]  # the same subject in another tenant

    counts, acme = report.counts, before["acme"]
    assert counts["memories"] == 2 and counts["memory_versions"] == 1
    assert counts["extraction_payloads"] == 2
    assert counts["checkpoints"] == _thread_rows(acme, CheckpointRecord, "alice-plain") == 2
    assert counts["delta_checkpoints"] == 4
    assert counts["delta_blocks"] == _thread_rows(acme, DeltaBlock, "alice-delta") > 0
    if alias == "default":
        graph = _thread_rows(acme, LangGraphCheckpoint, "alice-graph")
        # a row of its own thread, and one of a later checkpoint on the graph's thread
        assert counts["langgraph_pending_writes"] == 2
        assert counts["langgraph_checkpoints"] == graph - 1 > 0
    else:
        assert counts["langgraph_checkpoints"] == counts["langgraph_pending_writes"] == 0
    # bob's delta thread holds a block of the same content (digest) as alice's: it is his
    # own row, and stays (and his thread still loads).
    assert before_digests["alice-delta"] & before_digests["bob-delta"]
    assert _digests(alias) == {"bob-delta": before_digests["bob-delta"]}
    bob = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="acme"))
    assert async_to_sync(bob.load)("bob-delta").messages[-1].content == "noted 1"

    # The receipt: counts, actor, a keyed hash of the subject; no content.
    receipt = report.receipt
    assert receipt is not None and receipt.actor == "dpo@acme"
    assert (
        receipt.subject_ref
        == subject_reference("acme", "alice")
        != subject_reference("globex", "alice")
    )
    stored = json.dumps([receipt.tenant, receipt.subject_ref, receipt.counts, receipt.actor])
    assert "alice" not in stored and "Berlin" not in stored
    forgotten = sent_events.of(EV_STORE_SUBJECT_FORGOTTEN)
    assert [(e.sender, e.event, e.fields()) for e in forgotten] == [
        (
            ErasureReceipt,
            EV_STORE_SUBJECT_FORGOTTEN,
            {"tenant": "acme", "receipt": receipt.pk, "counts": counts, "total": report.total},
        )
    ]


@BOTH
def test_blanked_jobs_keep_their_bookkeeping(alias, world):
    forget_subject("acme", "alice", using=alias)
    from tulip_memory.models import ExtractionJob

    with tenant_atomic("acme", using=alias):
        jobs = ExtractionJob.objects.using(alias).filter(
            queue__namespace__startswith="acme/_erased/"
        )
        assert [(job.sequence, job.state, job.payload) for job in jobs.order_by("sequence")] == [
            (1, "pending", ERASED_PAYLOAD),
            (2, "pending", ERASED_PAYLOAD),
        ]


@BOTH
def test_a_dry_run_counts_the_same_and_changes_nothing(alias, world):
    before = rows(alias, "acme")
    dry = forget_subject("acme", "alice", dry_run=True, using=alias)
    assert dry.receipt is None and dry.dry_run
    assert rows(alias, "acme") == before
    real = forget_subject("acme", "alice", using=alias)
    assert real.counts == dry.counts and real.total > 0


@BOTH
def test_a_second_run_removes_nothing_and_is_on_record(alias, world):
    first = forget_subject("acme", "alice", using=alias)
    after_first = rows(alias, "acme")
    second = forget_subject("acme", "alice", using=alias)
    assert second.total == 0 and set(second.counts) == set(first.counts)
    after_second = rows(alias, "acme")
    assert receipts(after_second) == [first.counts, second.counts]
    assert {k: v for k, v in after_second.items() if k != RECEIPTS} == {
        k: v for k, v in after_first.items() if k != RECEIPTS
    }


@BOTH
def test_extra_namespace_prefixes_are_erased_too(alias, world):
    from tests.erasure.world import _memories

    _memories(alias, "acme", "alice-notes")  # (acme, users, alice-notes): not alice's
    before = rows(alias, "acme")
    report = forget_subject(
        "acme", "alice", namespace_prefixes=[("users", "alice-notes")], using=alias
    )
    assert report.counts["memories"] == 4 and report.counts["memory_versions"] == 2
    left = {namespace for namespace, _key in items(rows(alias, "acme"))}
    assert not any(ns.startswith(("acme/users/alice/", "acme/users/alice-notes/")) for ns in left)
    assert any(ns.startswith("acme/users/bob/") for ns in left)
    assert len(items(before)) - len(items(rows(alias, "acme"))) == 6


@BOTH
def test_bad_input_is_refused_with_nothing_changed(alias, world):
    before = {tenant: rows(alias, tenant) for tenant in ("acme", "globex")}
    with pytest.raises(ValueError, match="subject must not be only whitespace"):
        forget_subject("acme", "  ", using=alias)
    with pytest.raises(ValueError, match="subject must not be empty"):
        forget_subject("acme", "", using=alias)
    with pytest.raises(ValueError, match="subject must be a str"):
        forget_subject("acme", None, using=alias)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tenant must not be empty"):
        forget_subject("", "alice", using=alias)
    with pytest.raises(ValueError, match="tenant must not contain a NUL"):
        forget_subject("ac\x00me", "alice", using=alias)
    with pytest.raises(ConfigurationError, match=r"'nowhere' is not in settings\.DATABASES"):
        forget_subject("acme", "alice", using="nowhere")
    with pytest.raises(ValueError, match=r"namespace_prefixes\[0\] must be a non-empty tuple"):
        forget_subject("acme", "alice", namespace_prefixes=["users/alice"], using=alias)
    with pytest.raises(ValueError, match="namespace_prefixes must be a sequence"):
        forget_subject("acme", "alice", namespace_prefixes="users", using=alias)
    with pytest.raises(ValueError, match="actor must be a str"):
        forget_subject("acme", "alice", actor=42, using=alias)
    with tenant_context("globex"), pytest.raises(TenantError, match="'globex' is bound"):
        forget_subject("acme", "alice", using=alias)
    assert {tenant: rows(alias, tenant) for tenant in ("acme", "globex")} == before


@pytest.fixture
def receipts_refused():
    """A trigger (made by the table owner) that makes storing a receipt fail (on Citus it
    runs on the shards, which a distributed table allows only when asked)."""
    unsafe = is_citus(connections["owner"])
    statements = (
        *(["SET citus.enable_unsafe_triggers = on"] if unsafe else []),
        "CREATE FUNCTION tulip_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'receipts are refused'; END $$",
        "CREATE TRIGGER tulip_test_refuse BEFORE INSERT ON tulip_memory_erasure_receipt "
        "FOR EACH ROW EXECUTE FUNCTION tulip_test_refuse()",
    )
    with connections["owner"].cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    yield
    with connections["owner"].cursor() as cursor:
        cursor.execute("DROP TRIGGER tulip_test_refuse ON tulip_memory_erasure_receipt")
        cursor.execute("DROP FUNCTION tulip_test_refuse()")
        if unsafe:
            cursor.execute("RESET citus.enable_unsafe_triggers")


@pytest.mark.django_db(transaction=True, databases=["default", "owner"])
def test_a_failure_at_the_receipt_rolls_the_whole_erasure_back(receipts_refused):
    populate("default", "acme")
    before = rows("default", "acme")
    with pytest.raises(Exception, match="receipts are refused"):
        forget_subject("acme", "alice")
    assert rows("default", "acme") == before


def test_the_async_twin_erases_under_row_level_security(world):
    report = async_to_sync(aforget_subject)("globex", "bob", actor="async caller")
    assert report.counts["memories"] == 2 and report.counts["checkpoints"] == 1
    assert receipts(rows("default", "globex")) == [report.counts]
    assert receipts(rows("default", "acme")) == []  # row-level security: globex's receipt
    with tenant_atomic("acme"):
        assert not ErasureReceipt.objects.exists()  # invisible to another tenant


def test_the_langgraph_store_s_items_of_the_subject_are_erased_too(world):
    from tulip_memory.langgraph import DjangoStore

    store = DjangoStore(tenant="acme")
    try:
        for user in ("alice", "bob"):
            store.put(("users", user, "memories"), "m1", {"text": f"{user} lives in Berlin"})
        report = forget_subject("acme", "alice")
        assert ("acme", "langgraph", "users", "alice") in report.namespaces
        assert [i.namespace for i in store.search(("users",))] == [("users", "bob", "memories")]
        assert not any("alice" in namespace for namespace, _key in items(rows("default", "acme")))
    finally:
        store.close()


def test_a_user_as_actor_is_recorded_by_name_and_id():
    from django.contrib.auth.models import User

    user = User.objects.create_user("dpo", password="pw")
    report = forget_subject("acme", "alice", actor=user)
    assert report.receipt is not None and report.receipt.actor == f"dpo (user {user.pk})"


def test_an_erased_pending_job_runs_on_no_messages_and_saves_nothing(world):
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.models import ExtractionQueue, MemoryItem

    def items(prefix: str) -> int:
        with tenant_atomic("acme"):
            return MemoryItem.objects.filter(namespace__startswith=prefix).count()

    forget_subject("acme", "alice")
    bob_before = items("acme/users/bob/")
    with tenant_atomic("acme"):
        queues = dict(ExtractionQueue.objects.values_list("namespace", "pk"))
    [alices] = [pk for namespace, pk in queues.items() if ERASED_QUEUE.fullmatch(namespace)]
    for queue, jobs in ((alices, 2), (queues["acme/users/bob"], 1)):
        outcome = run_queue("acme", queue, owner="test-worker")
        assert (outcome.done, outcome.failed) == (jobs, 0)
    assert items("acme/users/alice/") == items("acme/_erased/") == 0
    # bob's job still had its conversation ("I live in Berlin")
    assert items("acme/users/bob/") > bob_before


@BOTH
def test_failed_jobs_keep_what_failed_not_the_message_and_alice_comes_back_to_a_new_queue(
    alias, world
):
    """A failed job's error may quote the conversation or the model's reply: only what
    failed stays. A session of the subject after the erasure starts a queue of its own."""
    from tulip_memory.models import ExtractionJob, ExtractionQueue

    errors = {
        "acme/users/alice": "LLMError: the reply 'alice lives in Berlin' is not JSON",
        "acme/users/bob": "LLMError: the reply 'bob lives in Rome' is not JSON",
    }
    with tenant_atomic("acme", using=alias):
        for namespace, error in errors.items():
            ExtractionJob.objects.using(alias).filter(queue__namespace=namespace).update(
                state="failed", error=error
            )
        ExtractionJob.objects.using(alias).filter(
            queue__namespace="acme/users/alice", sequence=2
        ).update(state="pending", error="worker lost during attempt 3; TimeoutError: Berlin?")
    forget_subject("acme", "alice", using=alias)
    with tenant_atomic("acme", using=alias):
        jobs = (
            ExtractionJob.objects.using(alias)
            .filter(tenant="acme")
            .order_by("queue__namespace", "sequence")
        )
        assert [(ERASED_QUEUE.sub("*", job.queue.namespace), job.error) for job in jobs] == [
            ("*", "LLMError: (message erased with the subject)"),
            ("*", "worker lost during attempt 3; TimeoutError: (message erased with the subject)"),
            ("acme/users/bob", errors["acme/users/bob"]),
        ]
        if alias == "default":  # the queue of celery mode's jobs (PostgreSQL)
            _, queue = ExtractionJob.objects.enqueue(("acme", "users", "alice"), {"messages": []})
            new = ExtractionQueue.objects.get(pk=queue)
            assert (new.namespace, new.last_sequence) == ("acme/users/alice", 1)


class _RolledBack(Exception):
    pass


def test_inside_an_outer_transaction_the_event_waits_for_its_commit(world, sent_events):
    from django.db import transaction

    with pytest.raises(_RolledBack), transaction.atomic():
        forget_subject("acme", "alice")
        assert sent_events.of(EV_STORE_SUBJECT_FORGOTTEN) == []  # not committed yet
        raise _RolledBack
    assert sent_events.of(EV_STORE_SUBJECT_FORGOTTEN) == []  # rolled back: never erased
    assert receipts(rows("default", "acme")) == []

    with transaction.atomic():
        report = forget_subject("acme", "alice")
        assert sent_events.of(EV_STORE_SUBJECT_FORGOTTEN) == []
    [sent] = sent_events.of(EV_STORE_SUBJECT_FORGOTTEN)  # sent on the commit
    assert report.receipt is not None and sent.fields()["receipt"] == report.receipt.pk


def test_a_job_running_while_its_subject_is_erased_saves_nothing(settings, monkeypatch):
    """The worker already holds the conversation when the erasure commits: its lease is
    revoked, so its check right before the save fails; the job's later run (on the erased
    payload) saves nothing either."""
    import asyncio
    import threading

    from tulip_memory.manager import LLMMemoryManager
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.messages import Message, Role
    from tulip_memory.models import ExtractionJob, MemoryItem

    settings.TULIP_MEMORY = {"STORE": "tulip_memory.store.PgMemory"}
    extracting, erased = threading.Event(), threading.Event()
    extract = LLMMemoryManager.extract

    async def extract_until_erased(self, messages):
        extracting.set()
        while not erased.is_set():
            await asyncio.sleep(0.01)
        return await extract(self, messages)

    monkeypatch.setattr(LLMMemoryManager, "extract", extract_until_erased)
    payload = {"messages": [Message(Role.USER, "I live in Berlin.").to_dict()]}
    with tenant_atomic("acme"):
        job_id, queue_id = ExtractionJob.objects.enqueue(("acme", "users", "alice"), payload)

    def worker(owner):
        try:
            run_queue("acme", queue_id, owner=owner)
        finally:
            connections.close_all()

    running = threading.Thread(target=worker, args=("w1",))
    running.start()
    assert extracting.wait(30)
    receipt = forget_subject("acme", "alice", actor="dpo")
    assert receipt.counts["extraction_payloads"] == 1
    erased.set()
    running.join(30)

    def alices_memories():
        with tenant_atomic("acme"):
            return list(MemoryItem.objects.filter(namespace__startswith="acme/users/alice"))

    assert alices_memories() == []
    worker("w2")  # the job runs again, on the erased payload
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(pk=job_id)
    assert job.state == "done" and job.payload == ERASED_PAYLOAD
    assert alices_memories() == []


def _tables_holding(text: str, tenant: str) -> list[str]:
    """Every table (of those the app role may read, as ``tenant``) with a row holding
    ``text`` anywhere in it, as ``table: rows``."""
    found = []
    with tenant_atomic(tenant), connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT c.oid::regclass::text FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() "
            "AND has_table_privilege(c.oid, 'SELECT')"
        )
        tables = [table for (table,) in cursor.fetchall()]
        assert "tulip_memory_extraction_job" in tables
        for table in tables:
            cursor.execute(
                f"SELECT count(*) FROM {table} AS t WHERE strpos(t::text, %s) > 0", [text]
            )
            (count,) = cursor.fetchone()
            if count:
                found.append(f"{table}: {count}")
    return found


@pytest.mark.parametrize("raised", ["LLMError", "RuntimeError"])
def test_a_job_failing_after_its_subject_is_erased_writes_nothing_back(
    raised, settings, monkeypatch, caplog, sent_events
):
    """The extractor is inside its call when the erasure commits, then fails with an error
    quoting the conversation (as a model's reply may): the revoked lease keeps the failure
    off the job's row, the job's error never holds the message anyway, and no log record
    above DEBUG nor any event carries it; a second erasure finds nothing left."""
    import asyncio
    import logging
    import threading

    from tulip_memory.exceptions import LLMError
    from tulip_memory.manager import LLMMemoryManager
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.messages import Message, Role
    from tulip_memory.models import ExtractionJob

    secret = "Wisteria Lane 4"
    settings.TULIP_MEMORY = {"STORE": "tulip_memory.store.PgMemory"}
    extracting, erased = threading.Event(), threading.Event()
    extract = LLMMemoryManager.extract

    async def extract_then_fail_quoting(self, messages):
        if not any(secret in message.content for message in messages):
            return await extract(self, messages)  # the erased payload, run again
        extracting.set()
        while not erased.is_set():
            await asyncio.sleep(0.01)
        quoted = f"the reply 'alice lives at {secret}' is not JSON"
        if raised == "LLMError":
            raise LLMError(quoted, kind="malformed_output")
        raise RuntimeError(quoted)

    monkeypatch.setattr(LLMMemoryManager, "extract", extract_then_fail_quoting)
    caplog.set_level(logging.DEBUG)
    payload = {"messages": [Message(Role.USER, f"I live at {secret}.").to_dict()]}
    with tenant_atomic("acme"):
        job_id, queue_id = ExtractionJob.objects.enqueue(("acme", "users", "alice"), payload)

    running = OnItsOwnConnections(lambda: run_queue("acme", queue_id, owner="w1"))
    running.start()
    assert extracting.wait(30)
    first = forget_subject("acme", "alice", actor="dpo")
    assert first.counts["extraction_payloads"] == 1
    erased.set()
    running.join_and_raise(30)

    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(pk=job_id)
    # The failed attempt left no mark; the worker ran the job again, on the erased payload.
    assert (job.state, job.error, job.payload) == ("done", "", ERASED_PAYLOAD)
    assert _tables_holding(secret, "acme") == []
    assert _tables_holding("Wisteria", "globex") == []
    loud = [r for r in caplog.records if r.levelno > logging.DEBUG]
    assert not [r for r in loud if secret in logging.Formatter().format(r)]
    assert not [e for e in sent_events.sent if secret in json.dumps(e.payload, default=str)]
    second = forget_subject("acme", "alice", actor="dpo")
    assert second.total == 0


@BOTH
def test_a_delta_save_during_the_erasure_waits_and_stores_a_whole_checkpoint(alias, monkeypatch):
    """A DeltaCheckpointer appends to a thread it has cached without reading it again.
    An erasure deleting that thread holds its writer lock until it commits: the save
    waits, finds the thread gone and stores a whole checkpoint (a delta appended to the
    deleted rows could not be loaded)."""
    import threading

    from tulip_memory import erasure
    from tulip_memory.messages import Message, Role
    from tulip_memory.state import AgentState

    checkpointer = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="acme"))
    state = AgentState(messages=[Message(Role.USER, "hi, I am Bob")], metadata={"subject": "bob"})
    async_to_sync(checkpointer.save)(state, "t")
    deleted, go, saved = threading.Event(), threading.Event(), threading.Event()
    erase = erasure._erase

    def erase_then_wait(*args, **kwargs):
        counts = erase(*args, **kwargs)
        deleted.set()
        go.wait(30)
        return counts

    monkeypatch.setattr(erasure, "_erase", erase_then_wait)
    reports = []
    erasing = OnItsOwnConnections(
        lambda: reports.append(forget_subject("acme", "bob", using=alias))
    )
    erasing.start()
    assert deleted.wait(30)
    state.messages.append(Message(Role.ASSISTANT, "hello Bob"))

    def save() -> None:
        async_to_sync(checkpointer.save)(state, "t")
        saved.set()

    saving = OnItsOwnConnections(save)
    saving.start()
    waited = not saved.wait(2)  # the erasure holds the thread
    go.set()
    erasing.join_and_raise(30)
    saving.join_and_raise(30)
    assert waited and reports[0].counts["delta_checkpoints"] == 1
    fresh = DeltaCheckpointer(ORMDeltaStorage(alias, tenant="acme"), cache_size=0)
    assert len(async_to_sync(fresh.list_checkpoints)("t")) == 1
    loaded = async_to_sync(fresh.load)("t")
    assert [m.content for m in loaded.messages] == ["hi, I am Bob", "hello Bob"]


def _until(condition, what: str, seconds: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.02)


def test_a_worker_taking_its_next_job_while_its_subject_is_erased_cannot_deadlock(settings):
    """The erasure locks the subject's jobs, then their queues; a worker taking its next job
    must lock them in that order too. A third transaction holds the job's row while the
    erasure, then the worker, queue behind it; once it commits, the erasure has the job and
    wants the queue: a worker that locked the queue (renewing its lease) before asking for
    the job would wait for the erasure while the erasure waits for it (PostgreSQL ends one
    with DeadlockDetected). In the erasure's order, the worker waits, then finds its lease
    revoked, and runs the job later on the erased payload."""
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.messages import Message, Role
    from tulip_memory.models import ExtractionJob, ExtractionQueue

    # A lease far longer than the test: the heartbeat does not renew it meanwhile.
    settings.TULIP_MEMORY = {
        "STORE": "tulip_memory.store.PgMemory",
        "EXTRACTION_LEASE_SECONDS": 300,
    }
    payload = {"messages": [Message(Role.USER, "I live in Berlin.").to_dict()]}
    with tenant_atomic("acme"):
        job_id, queue_id = ExtractionJob.objects.enqueue(("acme", "users", "alice"), payload)
    erasing = OnItsOwnConnections(lambda: forget_subject("acme", "alice", actor="dpo"))
    outcomes = []
    working = OnItsOwnConnections(lambda: outcomes.append(run_queue("acme", queue_id, owner="w1")))
    assert waiting_for_locks() == 0
    with tenant_atomic("acme"):
        ExtractionJob.objects.select_for_update().get(tenant="acme", pk=job_id)
        erasing.start()
        _until(lambda: waiting_for_locks() == 1, "the erasure to wait for the job's row")
        working.start()
        _until(lambda: waiting_for_locks() == 2, "the worker to wait for the job's row")
    erasing.join_and_raise(30)
    working.join_and_raise(30)
    assert not erasing.is_alive() and not working.is_alive()
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(pk=job_id)
        queue = ExtractionQueue.objects.get(pk=queue_id)
    assert (job.state, job.attempts, job.payload) == ("done", 1, ERASED_PAYLOAD)
    assert ERASED_QUEUE.fullmatch(queue.namespace) and queue.lease_owner == ""
    assert [o.done for o in outcomes] == [1]
    assert _tables_holding("Berlin", "acme") == []
