"""``manage.py tulip_memory_retry_jobs`` against PostgreSQL and the machine's Redis broker.

The run messages go to a queue of this test alone (``CELERY_QUEUE``), read back from Redis
and deleted; no worker consumes it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
from datetime import timedelta
from io import StringIO

import pytest
import redis
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.utils import timezone

from tulip_memory.manager.extraction.queue import CeleryExtractions
from tulip_memory.messages import Message, Role
from tulip_memory.models import ExtractionJob
from tulip_memory.tenancy import tenant_atomic

QUEUE = f"tulip_retry_jobs_test_{os.getpid()}"


@pytest.fixture
def sent(settings):
    """The (tenant, queue id) of each run message sent to this test's queue."""
    settings.TULIP_MEMORY = {"CELERY_QUEUE": QUEUE, "EXTRACTION_RESEND_AFTER": 60.0}
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    client.delete(QUEUE)

    def messages() -> list[tuple[str, int]]:
        found = []
        for raw in reversed(client.lrange(QUEUE, 0, -1)):
            message = json.loads(raw)
            assert message["headers"]["task"] == "tulip_memory.run_extraction_queue"
            args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
            found.append(tuple(args))
        return sorted(found)

    yield messages
    client.delete(QUEUE)
    client.close()


def _jobs(tenant: str) -> dict[str, tuple[str, int]]:
    with tenant_atomic(tenant):
        return {
            f"{job.queue.namespace}#{job.sequence}": (job.state, job.attempts)
            for job in ExtractionJob.objects.select_related("queue")
        }


@pytest.fixture
def jobs(sent):
    """acme: one failed job in acme/a, one stuck pending job in acme/b, one fresh in
    acme/c; globex: one failed job."""
    runner = CeleryExtractions()
    for namespace in (("acme", "a"), ("acme", "b"), ("acme", "c"), ("globex", "a")):
        runner.enqueue(namespace, [Message(Role.USER, "I live in Berlin.")])
    for tenant in ("acme", "globex"):
        with tenant_atomic(tenant):
            ExtractionJob.objects.filter(queue__namespace=f"{tenant}/a").update(
                state="failed", attempts=5, error="boom"
            )
            ExtractionJob.objects.filter(queue__namespace=f"{tenant}/b").update(
                created_at=timezone.now() - timedelta(minutes=5)
            )
    with tenant_atomic("acme"):
        return dict(ExtractionJob.objects.values_list("queue__namespace", "queue_id"))


def retry(*args: str) -> str:
    out = StringIO()
    call_command("tulip_memory_retry_jobs", *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.django_db
def test_retries_failed_and_requeues_stuck_queues_of_the_named_tenant(jobs, sent):
    output = retry("--tenant", "acme")
    assert "Tenant 'acme': 1 failed job(s) are pending again, 1 stuck queue(s) were" in output
    assert "  acme/a\n  acme/b\n" in output
    assert "Done: 1 failed job(s) retried, 1 stuck queue(s) requeued, 2 run message(s)" in output
    assert _jobs("acme") == {
        "acme/a#1": ("pending", 0),
        "acme/b#1": ("pending", 0),
        "acme/c#1": ("pending", 0),
    }
    assert _jobs("globex") == {"globex/a#1": ("failed", 5)}  # not named: untouched
    assert sent() == sorted([("acme", jobs["acme/a"]), ("acme", jobs["acme/b"])])
    again = retry("--tenant", "acme", "--only", "failed")
    assert "0 failed job(s) are pending again" in again


@pytest.mark.django_db
def test_dry_run_reports_and_changes_nothing(jobs, sent):
    output = retry("--tenant", "acme", "--tenant", "globex", "--dry-run")
    assert "Tenant 'globex': 1 failed job(s) would be pending again, 0 stuck" in output
    assert "Dry run: 2 failed job(s) retried, 1 stuck queue(s) requeued, 3 run" in output
    assert _jobs("acme")["acme/a#1"] == ("failed", 5)
    assert sent() == []


@pytest.mark.django_db
def test_namespace_and_only_narrow_the_work(jobs, sent):
    output = retry("--tenant", "acme", "--namespace", "acme/b", "--only", "stuck")
    assert "0 failed job(s) are pending again, 1 stuck queue(s) were requeued" in output
    assert sent() == [("acme", jobs["acme/b"])]
    assert _jobs("acme")["acme/a#1"] == ("failed", 5)
    output = retry("--tenant", "acme", "--only", "stuck", "--stuck-after", "600")
    assert "0 stuck queue(s)" in output


@pytest.mark.django_db
def test_an_unreachable_broker_fails_the_command_with_the_jobs_pending(jobs, sent):
    from celery import Celery, current_app

    previous = current_app._get_current_object()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    Celery("broker-down", broker=f"redis://127.0.0.1:{port}/0").set_current()
    try:
        with pytest.raises(CommandError, match=r"could not be sent .*periodic sweep"):
            retry("--tenant", "acme", "--only", "failed")
    finally:
        previous.set_current()
    assert _jobs("acme")["acme/a#1"] == ("pending", 0)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "Name the tenants with --tenant"),
        (("--tenant", "acme", "--namespace", "globex/a"), "belongs to tenant 'globex'"),
        (("--tenant", "acme", "--stuck-after", "0"), "--stuck-after must be a number of seconds"),
        (("--tenant", "acme", "--stuck-after", "inf"), "--stuck-after must be a number"),
        (("--tenant", "acme", "--stuck-after", "1e300"), r"at most .* seconds: 100 years"),
        (("--tenant", "acme", "--stuck-after", "nan"), "--stuck-after must be a number"),
        (("--tenant", "acme", "--only", "everything"), "invalid choice: 'everything'"),
        (("--tenant", "acme", "--database", "mysql"), "mysql; this command works on"),
    ],
)
def test_bad_input_is_refused_before_anything_changes(jobs, sent, args, message):
    with pytest.raises(CommandError, match=message):
        retry(*args)
    assert _jobs("acme")["acme/a#1"] == ("failed", 5)
    assert sent() == []
