"""The scenes of the ``tulip_demo`` command, run in this order.

Each scene is ``(title, scene)`` where ``scene(out)`` is an async callable writing
readable lines to ``out``. To add a layer's scene, import it and append it here.
"""

from collections.abc import Awaitable, Callable
from typing import TextIO

from example_project.demo.scenes.checkpoints import checkpoints_scene
from example_project.demo.scenes.conversation import conversation_scene
from example_project.demo.scenes.manager import manager_scene
from example_project.demo.scenes.pg_store import pg_store_scene
from example_project.demo.scenes.store import store_scene

Scene = Callable[[TextIO], Awaitable[None]]

SCENES: list[tuple[str, Scene]] = [
    ("Conversation management", conversation_scene),
    ("Cross-thread store", store_scene),
    ("Tenants on PostgreSQL (PgMemory, row-level security)", pg_store_scene),
    ("Checkpoints", checkpoints_scene),
    ("Long-term memory", manager_scene),
]
