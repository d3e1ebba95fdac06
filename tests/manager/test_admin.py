"""The admin of extraction queues and jobs, pinned to the admin tenant."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from tests.admin.conftest import pick_tenant
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
