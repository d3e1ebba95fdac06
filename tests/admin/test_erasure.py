"""The erasure receipts' admin (tenant-scoped, read-only, counts without content), and
erasure after the admin acted on the subject's rows: no copy of its text in any table."""

from __future__ import annotations

import contextlib
import os

import pytest
from django.db import connections
from django.urls import reverse
from psycopg import sql

from tests.admin.conftest import make_staff, pick_tenant
from tulip_memory.erasure import forget_subject
from tulip_memory.models import ErasureReceipt
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "admin:tulip_memory_erasurereceipt_changelist"


@pytest.fixture
def receipts():
    acme = forget_subject("acme", "alice", actor="dpo-acme").receipt
    globex = forget_subject("globex", "alice", actor="dpo-globex").receipt
    return acme, globex


def test_a_superuser_sees_the_picked_tenants_receipts_only(client, superuser, receipts):
    acme, globex = receipts
    client.force_login(superuser)
    pick_tenant(client, "acme")
    page = client.get(reverse(LIST)).content.decode()
    assert "dpo-acme" in page and acme.subject_ref[:16] in page
    assert "dpo-globex" not in page and globex.subject_ref[:16] not in page
    assert "Add erasure receipt" not in page
    detail = client.get(reverse("admin:tulip_memory_erasurereceipt_change", args=[acme.pk]))
    text = detail.content.decode()
    assert "<th>memories</th><td>0</td>" in text and "<th>delta_blocks</th><td>0</td>" in text
    assert acme.subject_ref in text and 'name="_save"' not in text and "alice" not in text
    # globex's receipt by a typed URL, acme picked: row-level security hides it.
    other = client.get(reverse("admin:tulip_memory_erasurereceipt_change", args=[globex.pk]))
    assert other.status_code == 302


def test_a_staff_member_sees_only_the_receipts_of_its_tenant(client, receipts):
    _acme, globex = receipts
    staff = make_staff("ann", ("globex",), "view_erasurereceipt")
    client.force_login(staff)
    page = client.get(reverse(LIST), HTTP_X_TENANT="acme").content.decode()
    assert "dpo-globex" in page and "dpo-acme" not in page
    assert client.post(
        reverse(LIST), {"action": "delete_selected", "_selected_action": [globex.pk]}
    )
    with tenant_atomic("globex"):
        assert ErasureReceipt.objects.filter(pk=globex.pk).exists()


SECRET = "Zanzibar"  # what only alice said


def _tables_holding(*needles: str) -> dict[str, int]:
    """Every table of the test database (as the superuser: row-level security hides
    nothing) -> how many of its rows hold one of ``needles`` (any case): in the row as
    text, or in a LangGraph row's compressed checkpoint or pending writes."""
    import psycopg

    from tests.migration_connections import with_database
    from tulip_memory.chains.rows import unpack_record, unpack_writes
    from tulip_memory.exceptions import CheckpointCorruptError

    def readable(value: bytes) -> bytes:
        parts = [value]
        with contextlib.suppress(CheckpointCorruptError):
            parts += [write.data for write in unpack_writes(value, "scan")]
        with contextlib.suppress(CheckpointCorruptError):
            record = unpack_record(value, "scan")
            parts += [record.checkpoint, record.metadata, *(e.data for e in record.entries)]
        return b"".join(parts)

    wanted = [needle.lower() for needle in needles]
    database = connections["default"].settings_dict["NAME"]
    url = with_database(os.environ["TULIP_TEST_ADMIN_URL"], database)
    found: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN "
            "('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
        ).fetchall()
        assert ("public", "django_admin_log") in tables
        for schema, table in tables:
            binary = conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                "AND table_name = %s AND data_type = 'bytea'",
                [schema, table],
            ).fetchall()
            columns = [sql.Identifier(column) for (column,) in binary]
            query = sql.SQL("SELECT {} FROM {} AS t").format(
                sql.SQL(", ").join([sql.SQL("to_jsonb(t)::text"), *columns]),
                sql.Identifier(schema, table),
            )
            hits = 0
            for text, *values in conn.execute(query):
                decoded = b"".join(readable(value) for value in values if value is not None)
                content = text.lower() + decoded.decode("utf-8", "replace").lower()
                hits += any(needle in content for needle in wanted)
            if hits:
                found[f"{schema}.{table}"] = hits
    return found


@pytest.fixture
def run_messages(settings):
    """The extraction run messages go to a Redis queue of this test alone, deleted after
    (no worker consumes it)."""
    import redis
    from django.conf import settings as django_settings

    queue = f"tulip_admin_erasure_test_{os.getpid()}"
    settings.TULIP_MEMORY = {"CELERY_QUEUE": queue}
    yield
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    client.delete(queue)
    client.close()


def test_after_erasure_no_table_holds_the_subjects_name_or_words(root_client, run_messages):
    """alice's failed job (its error quoting her) was retried in the admin and one of her
    memories forgotten there, with entries in the admin log as it wrote them before it
    logged ids too; LangGraph stored pending writes of hers before their checkpoint.
    After forget_subject no table of the database, django_admin_log included, holds her
    name or her words."""
    from django.contrib.admin.models import CHANGE, DELETION, LogEntry

    from tests.erasure.world import populate
    from tulip_memory.langgraph import DjangoSaver
    from tulip_memory.models import ExtractionJob, MemoryItem

    populate("default", "acme")
    early = {"thread_id": "t-early", "checkpoint_id": "f-1"}
    DjangoSaver(tenant="acme").put_writes(
        {"configurable": early, "metadata": {"subject": "alice"}},
        [("messages", [f"I moved to {SECRET}"])],
        "task-1",
    )
    error = f"LLMError: the reply 'you moved to {SECRET}' is not JSON"
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.select_related("queue").get(
            queue__namespace="acme/users/alice", sequence=1
        )
        ExtractionJob.objects.filter(pk=job.pk).update(state="failed", error=error)
        memory = MemoryItem.objects.get(namespace="acme/users/alice/user", key="tea")
        # As the admin logged them before: the object's name (its namespace) and the error.
        LogEntry.objects.log_actions(
            root_client.session["_auth_user_id"], [job], CHANGE, f"Retried ({error})"
        )
        LogEntry.objects.log_actions(root_client.session["_auth_user_id"], [memory], DELETION)
    pick_tenant(root_client, "acme")
    root_client.post(
        reverse("admin:tulip_memory_extractionjob_changelist"),
        {"action": "retry_jobs", "_selected_action": [job.pk]},
    )
    root_client.post(
        reverse("admin:tulip_memory_memoryitem_changelist"),
        {"action": "forget_memories", "_selected_action": [memory.pk], "post": "yes"},
    )
    assert LogEntry.objects.count() == 4
    tables = "public.tulip_memory_langgraph_checkpoint", "public.django_admin_log"
    assert set(tables) <= set(_tables_holding(SECRET))  # the scan reads them

    report = forget_subject("acme", "alice", actor="dpo")
    assert _tables_holding("alice", SECRET) == {}
    # Both entries of the job and the old one of the forgotten memory (the new one
    # names the memory by id: nothing to scrub).
    assert report.counts["admin_log_entries"] == 3
    assert report.counts["langgraph_pending_writes"] == 3
    assert LogEntry.objects.count() == 4
