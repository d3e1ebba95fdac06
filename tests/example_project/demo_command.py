"""Run ``manage.py tulip_demo`` in the test process and return what it printed."""

from __future__ import annotations

import io

from django.core.management import call_command


def run_demo(*args: str) -> str:
    """The output of ``tulip_demo *args`` (no colours)."""
    out = io.StringIO()
    call_command("tulip_demo", *args, stdout=out, no_color=True)
    return out.getvalue()


def run_scene(title: str) -> str:
    """The output of the scenes whose title matches ``title``."""
    return run_demo("--scene", title)
