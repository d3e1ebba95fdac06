"""The read-only admin of extraction queues and jobs, pinned to the request's tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tulip_memory.manager.extraction.queue import CeleryExtractions
from tulip_memory.messages import Message, Role
from tulip_memory.tenancy import tenant_context

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


def test_changelists_show_the_requests_tenant_only(admin_client):
    with tenant_context("acme"):
        jobs = admin_client.get("/admin/tulip_memory/extractionjob/")
        queues = admin_client.get("/admin/tulip_memory/extractionqueue/")
    assert jobs.status_code == 200 and queues.status_code == 200
    assert b"acme/admin-user" in jobs.content and b"globex" not in jobs.content
    assert b"acme/admin-user" in queues.content and b"admin-other" not in queues.content
    anonymous_tenant = admin_client.get("/admin/tulip_memory/extractionjob/")
    assert b"admin-user" not in anonymous_tenant.content


def test_admin_is_read_only(admin_client):
    with tenant_context("acme"):
        assert admin_client.get("/admin/tulip_memory/extractionjob/add/").status_code == 403
        from tulip_memory.models import ExtractionJob
        from tulip_memory.tenancy import tenant_atomic

        with tenant_atomic():
            job_id = ExtractionJob.objects.get().pk
        detail = admin_client.get(f"/admin/tulip_memory/extractionjob/{job_id}/change/")
        assert detail.status_code == 200 and b"hello" in detail.content
        delete = admin_client.post(
            f"/admin/tulip_memory/extractionjob/{job_id}/delete/", {"post": "yes"}
        )
        assert delete.status_code == 403
