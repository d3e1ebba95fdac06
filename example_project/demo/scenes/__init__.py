"""The scenes of the ``tulip_demo`` command, run in this order.

Each scene is ``(title, scene)`` where ``scene(out)`` is an async callable writing
readable lines to ``out``. To add a layer's scene, import it and append it here.
"""

from collections.abc import Awaitable, Callable
from typing import TextIO

from example_project.demo.scenes.conversation import conversation_scene

Scene = Callable[[TextIO], Awaitable[None]]

SCENES: list[tuple[str, Scene]] = [
    ("Conversation management", conversation_scene),
]
