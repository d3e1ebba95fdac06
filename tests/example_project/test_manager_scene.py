"""The demo's long-term memory scene (example_project/demo/scenes/manager.py)."""

from __future__ import annotations

import pytest

from tests.example_project.demo_command import run_scene


@pytest.mark.django_db(transaction=True)
def test_manager_scene_shows_recall_history_and_ordered_celery_jobs(settings):
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    before = client.llen("tulip_memory")
    scene = run_scene("long-term")
    assert "Extractor: the offline heuristic. To let a chat model decide" in scene
    assert 'set TULIP_MEMORY["LLM"] = {"BASE_URL": ..., "MODEL": ...}' in scene
    assert "role                                       The user is a data scientist" in scene
    assert "  | About the user:" in scene
    assert "An anonymous run (the resolver returns None) gets 0 memory block(s)." in scene
    assert "-> now             The user is a staff engineer at Globex." in scene
    assert "  demo/users/ada   #2  done    attempts=1" in scene
    assert "Ada's location after both jobs, in order: The user lives in Paris." in scene
    # The scene ran the jobs itself: no run message is left for a worker to find later.
    assert client.llen("tulip_memory_demo") == 0
    assert client.llen("tulip_memory") == before
    client.close()


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_scene_runs_the_same_and_warns_of_nothing(settings, caplog):
    """The scene runs the jobs itself: a broker that does not answer changes nothing, and
    the warning that the sweep will send the job's message (not what happens here) is held
    back."""
    from celery import current_app

    previous = current_app.conf.broker_url
    current_app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        scene = run_scene("long-term")
    finally:
        current_app.conf.broker_url = previous
    assert "Ada's location after both jobs, in order: The user lives in Paris." in scene
    assert "could not be sent" not in scene + caplog.text
