"""The example project's main job, ``manage.py tulip_demo``."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from tests.example_project.demo_command import run_demo


# Later scenes use the database (from other threads, through the async ORM).
@pytest.mark.django_db(transaction=True)
def test_the_demo_runs_every_scene_and_shows_the_conversation_layer():
    output = run_demo()
    assert " 1. Conversation management" in output
    scene = output.split(" 1. Conversation management", 1)[1].split("\n 2. ", 1)[0]
    # The sliding window: what was kept and pruned, and its event.
    assert "kept 8 of 20, pruned 12 (#02-#13)." in scene
    assert "     #01  user      Plan a weekend in Lisbon" in scene
    assert "memory.conversation.pruned  window_size=8 slide_step=4 removed_count=12" in scene
    assert "first_user_reattached=True" in scene
    assert "slide_step=4: the prefix changed on 3 of 18 requests" in scene
    # The summarising manager: the summary, the cache, the failure path and their events.
    assert "summarised 9 (#01-#09, the mid-run note #09 among them)" in scene
    assert "| [Summary of previous conversation (9 messages)]:" in scene
    assert "memory.compactor.triggered  threshold=12 messages_before=18" in scene
    assert "memory.compactor.completed  messages_before=18 messages_after=12" in scene
    assert "summary reused from the cache: True (summarize_fn calls so far: 1)" in scene
    assert "history returned un-summarised: True (21 messages, nothing lost)" in scene
    assert "logged: ERROR tulip_memory.conversation: summarize_fn _failing_summariser" in scene
    assert "memory.compactor.failed  messages_before=19 summarized_count=9" in scene
    assert "error_type=ConnectionError" in scene


def test_scene_selection():
    output = run_demo("--scene", "CONVERSATION")
    assert " 1. Conversation management" in output
    assert "\n 2. " not in output
    with pytest.raises(CommandError, match="No scene matches"):
        run_demo("--scene", "no such scene")
