"""The demo's long-term memory scene (example_project/demo/scenes/manager.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db(transaction=True)
def test_manager_scene_shows_recall_history_and_ordered_celery_jobs(settings):
    settings.TULIP_MEMORY = {"CELERY_QUEUE": "tulip_memory_demo_test_unconsumed"}
    out = io.StringIO()
    call_command("tulip_demo", "--scene", "long-term", stdout=out, no_color=True)
    scene = out.getvalue()
    assert "role                                       The user is a data scientist" in scene
    assert "  | About the user:" in scene
    assert "An anonymous run (the resolver returns None) gets 0 memory block(s)." in scene
    assert "-> now             The user is a staff engineer at Globex." in scene
    assert "  demo/users/ada   #2  done    attempts=1" in scene
    assert "Ada's location after both jobs, in order: The user lives in Paris." in scene
    import redis

    redis.Redis.from_url(settings.REDIS_URL).delete("tulip_memory_demo_test_unconsumed")
