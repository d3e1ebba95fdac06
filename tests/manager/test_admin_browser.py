"""The extraction admin in a real browser: a failed job retried completes on a real worker.

Browser fixtures: tests/admin/browser.py; workers: ``celery -A example_project worker``
processes on this session's queue (tests/manager/celery_setup.py).
"""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.urls import reverse

from tests.admin.browser import follow, login, tenant_shown
from tests.manager.extractors import read_log
from tulip_memory.manager.extraction.queue import CeleryExtractions
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob
from tulip_memory.tenancy import tenant_atomic

pytestmark = pytest.mark.usefixtures("browser_db")


def _failed_job() -> int:
    """A job of acme that failed (marked so before its message is even sent)."""
    with transaction.atomic():
        job_id = CeleryExtractions().enqueue(("acme", "retryns"), [Message(Role.USER, "retryns 1")])
        with tenant_atomic("acme"):
            ExtractionJob.objects.filter(pk=job_id).update(
                state="failed", attempts=3, error="simulated outage"
            )
    return job_id


def _state(job_id: int) -> str:
    with tenant_atomic("acme"):
        return ExtractionJob.objects.get(pk=job_id).state


def test_a_failed_job_is_retried_from_the_admin_and_completes_on_a_worker(
    page, live_server, shoot, celery_settings, workers
):
    job_id = _failed_job()
    User.objects.create_superuser("root", "root@example.com", "pw")
    login(page, live_server, "root")
    page.goto(f"{live_server.url}{reverse('admin:tulip_memory_extractionjob_changelist')}")
    assert tenant_shown(page) == "acme"  # the only registered tenant: nothing to pick
    follow(page, "#changelist-filter a:text-is('Failed')")
    shoot("failed-jobs")
    page.check("#result_list input.action-select")
    page.select_option("select[name=action]", "retry_jobs")
    follow(page, "button[name=index]")
    assert "1 failed job is pending again" in page.content()
    shoot("retried")

    deadline = time.monotonic() + 30
    while _state(job_id) != "done":
        assert time.monotonic() < deadline, f"the retried job did not finish:\n{workers.logs()}"
        time.sleep(0.2)
    assert [line.split()[0] for line in read_log("retryns")] == ["1"]
    page.goto(
        f"{live_server.url}{reverse('admin:tulip_memory_extractionjob_change', args=[job_id])}"
    )
    assert "Done" in page.inner_text(".field-state")
    # What the job did, linked to the memory; its conversation without a checkpoint's diff.
    assert page.inner_text(".field-memory_operations li") == "SAVE project/last_job"
    assert "No parent" not in page.content() and "retryns 1" in page.inner_text(
        ".field-conversation"
    )
    shoot("done")
    follow(page, ".field-memory_operations a:text-is('project/last_job')")
    assert "retryns job 1" in page.inner_text("#content")  # the memory's page
    shoot("its-memory")
