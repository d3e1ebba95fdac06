"""Helpers of the tests that run code in another process or in several threads."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def run_python(
    script: str, *args: str, django_settings: bool = True, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``python -c script *args`` from the project root; its output is text.

    ``django_settings=False`` drops DJANGO_SETTINGS_MODULE (the pure layers' tests);
    ``env`` adds variables. The caller checks the return code.
    """
    environment = {**os.environ, **env}
    if not django_settings:
        environment.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=PROJECT_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_in_threads(target: Callable[[int], object], count: int) -> list[BaseException]:
    """Run ``target(n)`` for n in range(count), each in its own thread; the exceptions raised."""
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            target(n)
        except BaseException as exc:  # reported to the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
