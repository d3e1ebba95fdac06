"""The extraction jobs admin at volume: what the list and the retry action cost."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.admin.conftest import pick_tenant
from tulip_memory.admin.extraction import RETRIED_MESSAGE
from tulip_memory.models import ExtractionJob, ExtractionQueue, Tenant
from tulip_memory.tenancy import tenant_atomic

CHANGELIST = "admin:tulip_memory_extractionjob_changelist"
PAYLOAD = {"messages": [{"role": "user", "content": "a long conversation " * 20}]}


def _jobs(count: int, *, errors: tuple[str, ...] = ("boom",), state: str = "failed") -> None:
    """``count`` jobs of one queue of the tenant "acme" (cycling through ``errors``)."""
    Tenant.objects.get_or_create(name="acme")
    with tenant_atomic("acme"):
        queue, _ = ExtractionQueue.objects.get_or_create(tenant="acme", namespace="acme/u/user")
        start = ExtractionJob.objects.count()
        ExtractionJob.objects.bulk_create(
            ExtractionJob(
                queue=queue,
                tenant="acme",
                sequence=start + n + 1,
                payload=PAYLOAD,
                state=state,
                attempts=3,
                error=errors[n % len(errors)],
            )
            for n in range(count)
        )


def _retry_all_failed(client) -> CaptureQueriesContext:
    with tenant_atomic("acme"):
        any_pk = ExtractionJob.objects.filter(state="failed").values_list("pk", flat=True)[0]
    action = {
        "action": "retry_jobs",
        "select_across": "1",
        "index": "0",
        "_selected_action": [any_pk],
    }
    with CaptureQueriesContext(connection) as queries:
        response = client.post(reverse(CHANGELIST) + "?state__exact=failed", action)
    assert response.status_code == 302
    return queries


@pytest.mark.django_db
def test_retrying_failed_jobs_logs_their_ids_not_their_errors_in_one_insert(
    root_client, django_capture_on_commit_callbacks
):
    """One admin-log INSERT whatever the jobs and their errors; each entry names its job
    by id, never by its queue's path, and says it was retried, not what the error was
    (an error may quote the conversation)."""
    _jobs(1)
    pick_tenant(root_client, "acme")
    with django_capture_on_commit_callbacks():
        _retry_all_failed(root_client)  # the first one reads the content types
    _jobs(2)
    with django_capture_on_commit_callbacks():
        few = len(_retry_all_failed(root_client).captured_queries)
    _jobs(12, errors=("boom",))
    with django_capture_on_commit_callbacks():
        many = len(_retry_all_failed(root_client).captured_queries)
    _jobs(6, errors=("boom", "LLMError: the reply 'I live in Berlin' is not JSON"))
    with django_capture_on_commit_callbacks():
        two_errors = len(_retry_all_failed(root_client).captured_queries)
    assert many == few == two_errors
    entries = LogEntry.objects.filter(action_flag=CHANGE)
    assert entries.count() == 1 + 2 + 12 + 6
    with tenant_atomic("acme"):
        jobs = set(ExtractionJob.objects.values_list("pk", flat=True))
    assert {int(entry.object_id) for entry in entries} == jobs
    for entry in entries:
        assert entry.object_repr == f"extraction job #{entry.object_id}"
        assert entry.change_message == RETRIED_MESSAGE
    with tenant_atomic("acme"):
        assert not ExtractionJob.objects.filter(state="failed").exists()


@pytest.mark.django_db
def test_the_job_list_leaves_the_payload_in_the_database(root_client):
    _jobs(3)
    pick_tenant(root_client, "acme")
    with CaptureQueriesContext(connection) as queries:
        page = root_client.get(reverse(CHANGELIST))
    assert page.status_code == 200 and "acme/u/user" in page.content.decode()
    listed = [q["sql"] for q in queries.captured_queries if '"sequence"' in q["sql"]]
    assert listed and all('"payload"' not in sql for sql in listed)
    # The job's page still shows it.
    with tenant_atomic("acme"):
        pk = ExtractionJob.objects.values_list("pk", flat=True)[0]
    detail = root_client.get(reverse("admin:tulip_memory_extractionjob_change", args=[pk]))
    assert "a long conversation" in detail.content.decode()
