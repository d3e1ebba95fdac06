"""The admin of extraction queues and jobs, pinned to the admin tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.admin.conftest import pick_tenant
from tulip_memory.admin.extraction import RETRIED_MESSAGE
from tulip_memory.manager.extraction.queue import CeleryExtractions
from tulip_memory.messages import Message, Role
from tulip_memory.tenancy import tenant_atomic, tenant_context

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, celery_settings, settings):
    settings.TULIP_MEMORY = {
        **celery_settings,
        "CELERY_QUEUE": f"{celery_settings['CELERY_QUEUE']}_local",
    }
    runner = CeleryExtractions()
    runner.enqueue(("acme", "admin-user"), [Message(Role.USER, "hello")])
    runner.enqueue(("globex", "admin-other"), [Message(Role.USER, "hello")])
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def _results(page) -> bytes:
    """The changelist's table (the tenant switcher above it lists every tenant)."""
    content = page.content
    return content[content.index(b'id="result_list"') :]


def test_changelists_show_the_admin_tenant_only(admin_client):
    anonymous_tenant = admin_client.get("/admin/tulip_memory/extractionjob/")
    assert b"admin-user" not in anonymous_tenant.content
    pick_tenant(admin_client, "acme")
    jobs = admin_client.get("/admin/tulip_memory/extractionjob/")
    queues = admin_client.get("/admin/tulip_memory/extractionqueue/")
    assert jobs.status_code == 200 and queues.status_code == 200
    assert b"acme/admin-user" in _results(jobs) and b"globex" not in _results(jobs)
    assert b"acme/admin-user" in _results(queues) and b"admin-other" not in _results(queues)
    with tenant_context("globex"):  # a tenant bound around the request is not the admin's
        assert b"admin-other" not in admin_client.get("/admin/tulip_memory/extractionjob/").content


def test_admin_is_read_only(admin_client):
    pick_tenant(admin_client, "acme")
    assert admin_client.get("/admin/tulip_memory/extractionjob/add/").status_code == 403
    from tulip_memory.models import ExtractionJob
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic("acme"):
        job_id = ExtractionJob.objects.get().pk
    detail = admin_client.get(f"/admin/tulip_memory/extractionjob/{job_id}/change/")
    assert detail.status_code == 200 and b"hello" in detail.content
    delete = admin_client.post(
        f"/admin/tulip_memory/extractionjob/{job_id}/delete/", {"post": "yes"}
    )
    assert delete.status_code == 403


def _job_id(tenant: str = "acme") -> int:
    from tulip_memory.models import ExtractionJob
    from tulip_memory.tenancy import tenant_atomic

    with tenant_atomic(tenant):
        return ExtractionJob.objects.get().pk


def test_the_usage_column_names_failed_requests_only_when_there_are_some(admin_client):
    from tulip_memory.models import ExtractionJob

    pick_tenant(admin_client, "acme")
    jobs = "/admin/tulip_memory/extractionjob/"
    fresh = _results(admin_client.get(jobs)).decode()
    assert "0 calls, 0 + 0 tokens<" in fresh and "failed requests" not in fresh
    with tenant_atomic("acme"):
        ExtractionJob.objects.update(
            llm_calls=2, prompt_tokens=120, completion_tokens=30, llm_failed_requests=3
        )
    assert (
        "2 calls, 120 + 30 tokens; 3 failed requests<" in _results(admin_client.get(jobs)).decode()
    )
    with tenant_atomic("acme"):
        ExtractionJob.objects.update(llm_calls=1, llm_failed_requests=1)
    assert "1 call, 120 + 30 tokens; 1 failed request<" in _results(admin_client.get(jobs)).decode()


def test_the_payload_needs_its_own_permission(admin_client, client):
    from tests.admin.conftest import make_staff

    url = f"/admin/tulip_memory/extractionjob/{_job_id()}/change/"
    client.force_login(make_staff("viewer", ("acme",), "view_extractionjob"))
    page = client.get(url)
    assert page.status_code == 200 and b"hello" not in page.content
    client.force_login(
        make_staff("reader", ("acme",), "view_extractionjob", "view_extractionjob_payload")
    )
    assert b'data-role="user"' in client.get(url).content


def test_jobs_filter_by_state_and_namespace_and_queues_count_them(admin_client):
    from tulip_memory.models import ExtractionJob

    pick_tenant(admin_client, "acme")
    jobs = "/admin/tulip_memory/extractionjob/"
    assert b"admin-user" in _results(admin_client.get(jobs, {"state": "pending"}))
    assert b"0 extraction jobs" in admin_client.get(jobs, {"state": "failed"}).content
    with tenant_atomic("acme"):
        queue_id = ExtractionJob.objects.get().queue_id
    assert b"admin-user" in _results(admin_client.get(jobs, {"queue": queue_id}))
    assert b"0 extraction jobs" in admin_client.get(jobs, {"queue": "x"}, follow=True).content
    queues = admin_client.get("/admin/tulip_memory/extractionqueue/").content.decode()
    assert 'class="field-pending_jobs">1<' in queues and 'class="field-heartbeat_age">-<' in queues


def test_retry_needs_the_permission_resets_the_job_and_is_logged(
    admin_client, client, django_capture_on_commit_callbacks
):
    from django.contrib.admin.models import CHANGE, LogEntry

    from tests.admin.conftest import make_staff
    from tulip_memory.models import ExtractionJob

    job_id = _job_id()
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(pk=job_id).update(state="failed", attempts=3, error="boom")
    action = {"action": "retry_jobs", "_selected_action": [job_id]}
    client.force_login(make_staff("viewer", ("acme",), "view_extractionjob"))
    client.post("/admin/tulip_memory/extractionjob/", action)
    with tenant_atomic("acme"):
        assert ExtractionJob.objects.get().state == "failed"
    retrier = make_staff("retrier", ("acme",), "view_extractionjob", "retry_extractionjob")
    client.force_login(retrier)
    with django_capture_on_commit_callbacks() as sent:
        page = client.post("/admin/tulip_memory/extractionjob/", action, follow=True)
    assert b"1 failed job is pending again" in page.content and len(sent) == 1
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get()
    assert (job.state, job.attempts, job.run_after) == ("pending", 0, None)
    # The log names the job by its id and says what was done, never the job's error.
    entry = LogEntry.objects.get(action_flag=CHANGE)
    assert entry.user == retrier and entry.change_message == RETRIED_MESSAGE
    assert "boom" not in entry.change_message and entry.object_repr == f"extraction job #{job.pk}"
    with django_capture_on_commit_callbacks() as sent:
        page = client.post("/admin/tulip_memory/extractionjob/", action, follow=True)
    assert b"No failed job was selected" in page.content and not sent


def test_a_job_page_is_titled_by_its_namespace(admin_client):
    from tulip_memory.models import ExtractionJob

    pick_tenant(admin_client, "acme")
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.select_related("queue").get()
        assert str(job) == "acme/admin-user #1 (pending)"
    page = admin_client.get(f"/admin/tulip_memory/extractionjob/{job.pk}/change/").content
    assert b"acme/admin-user #1 (pending)" in page
    unpinned = ExtractionJob(pk=job.pk, queue_id=job.queue_id, sequence=1, state="pending")
    assert str(unpinned) == f"queue {job.queue_id} #1 (pending)"  # RLS hides the queue


def test_a_job_page_lists_the_memory_operations_it_applied_with_links(admin_client):
    from tulip_memory.manager.extraction.worker import run_queue
    from tulip_memory.models import ExtractionJob, MemoryItem

    CeleryExtractions().enqueue(("acme", "ops"), [Message(Role.USER, "ops 1")])
    with tenant_atomic("acme"):
        job = ExtractionJob.objects.get(queue__namespace="acme/ops")
        pending = ExtractionJob.objects.exclude(pk=job.pk).get()
    pick_tenant(admin_client, "acme")
    page = admin_client.get(f"/admin/tulip_memory/extractionjob/{job.pk}/change/").content
    assert b"None yet: the job is not done." in page
    assert run_queue("acme", job.queue_id).done == 1
    with tenant_atomic("acme"):
        memory = MemoryItem.objects.get(namespace="acme/ops/project", key="last_job")
    page = admin_client.get(f"/admin/tulip_memory/extractionjob/{job.pk}/change/").content
    link = f'<a href="/admin/tulip_memory/memoryitem/{memory.pk}/change/">project/last_job</a>'
    assert f"<li><code>SAVE</code> {link}</li>".encode() in page
    assert b'data-role="user"' in page
    # A job's conversation is not a checkpoint: no diff against a parent.
    assert b"No parent" not in page and b"tulip-diff" not in page
    other = admin_client.get(f"/admin/tulip_memory/extractionjob/{pending.pk}/change/").content
    assert b"No parent" not in other and b"None yet: the job is not done." in other
    with tenant_atomic("acme"):
        ExtractionJob.objects.filter(pk=job.pk).update(payload={})  # purged
    page = admin_client.get(f"/admin/tulip_memory/extractionjob/{job.pk}/change/").content
    assert b"Not recorded: the job&#x27;s payload was purged or erased." in page
