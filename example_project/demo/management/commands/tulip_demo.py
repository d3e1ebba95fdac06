"""``manage.py tulip_demo``: the example project's main job, one scene per tulip_memory layer."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from example_project.demo.scenes import SCENES, Scene

RULE_WIDTH = 78


class Command(BaseCommand):
    help = "Run the tulip_memory demo: each scene of example_project.demo.scenes, in order."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scene",
            action="append",
            default=[],
            metavar="TEXT",
            help="Run only the scenes whose title contains TEXT (case-insensitive; repeatable).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = [text.lower() for text in options["scene"]]
        scenes = [
            (title, scene)
            for title, scene in SCENES
            if not wanted or any(text in title.lower() for text in wanted)
        ]
        if not scenes:
            titles = ", ".join(repr(title) for title, _ in SCENES)
            raise CommandError(f"No scene matches {options['scene']}; the scenes are: {titles}")
        asyncio.run(self._run(scenes))

    async def _run(self, scenes: list[tuple[str, Scene]]) -> None:
        for number, (title, scene) in enumerate(scenes, start=1):
            self.stdout.write(self.style.MIGRATE_HEADING("=" * RULE_WIDTH))
            self.stdout.write(self.style.MIGRATE_HEADING(f" {number}. {title}"))
            self.stdout.write(self.style.MIGRATE_HEADING("=" * RULE_WIDTH))
            await scene(self.stdout)
            self.stdout.write("")
