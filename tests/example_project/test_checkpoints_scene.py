"""The checkpoints scene of ``manage.py tulip_demo``."""

from __future__ import annotations

import re

import pytest

from tests.example_project.demo_command import run_scene


@pytest.mark.django_db(transaction=True)
def test_the_checkpoints_scene():
    scene = run_scene("checkpoints")
    assert "Saved 58 turns (117 messages) to PostgreSQL, tenant 'demo':" in scene
    assert "58 checkpoints: 10 full, 48 deltas, 10 message blocks" in scene
    saving = float(re.search(r"-> (\d+\.\d)% less", scene).group(1))
    assert saving > 95
    assert "rebuilt the newest state in 2 reads: equal=True" in scene
    edit = re.search(
        r"Edited message #3 and saved: a delta checkpoint, storage grew by (\d+) bytes", scene
    )
    assert edit and int(edit.group(1)) < 300
    assert "prune(keep_last=5): deleted 54, the 5 kept still load equal=True" in scene
    assert "get_checkpointer('file:<tmp>') -> FileCheckpointer, round trip equal=True" in scene
