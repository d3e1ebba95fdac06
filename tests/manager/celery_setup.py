"""The Celery side of the manager tests: TULIP_MEMORY shared by test process and workers,
and the worker processes themselves (``celery -A example_project worker``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def celery_tulip_memory() -> dict[str, Any]:
    """TULIP_MEMORY of the Celery tests, from the environment the session fixture set.

    ``TULIP_TEST_LLM_BASE_URL`` (the chat-server test double's URL) configures the chat
    model, so the workers run the LLM extractor; ``TULIP_TEST_STORE`` names another store.
    """
    llm_url = os.environ.get("TULIP_TEST_LLM_BASE_URL")
    return {
        "STORE": os.environ.get("TULIP_TEST_STORE", "tulip_memory.store.PgMemory"),
        # bench/manager.py sets TULIP_TEST_EXTRACTOR="" to run the heuristic instead.
        "EXTRACTOR": None
        if llm_url
        else os.environ.get("TULIP_TEST_EXTRACTOR", "tests.manager.extractors.logging_extractor")
        or None,
        "LLM": {"BASE_URL": llm_url, "MODEL": "test-model", "RETRY_BACKOFF": 0.01}
        if llm_url
        else {},
        "CELERY_QUEUE": os.environ.get("TULIP_TEST_CELERY_QUEUE", "tulip_memory_test"),
        "EXTRACTION_LEASE_SECONDS": 2,
        "EXTRACTION_MAX_ATTEMPTS": 3,
        "EXTRACTION_RETRY_DELAY": 0.2,
    }


class Workers:
    """``count`` Celery worker processes (prefork, one child each) on the test queue."""

    def __init__(self, count: int, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.count = count
        self.log_dir = log_dir
        self.env = env or {}
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, timeout: float = 90.0) -> None:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.manager.worker_settings",
            **self.env,
        }
        queue = env["TULIP_TEST_CELERY_QUEUE"]
        for index in range(self.count):
            log = self.log_dir / f"worker{index}.log"
            command = [
                sys.executable, "-m", "celery", "-A", "example_project", "worker",
                "--pool=prefork", "--concurrency=1", "-Q", queue, "-n", f"{queue}-w{index}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel=INFO", f"--logfile={log}",
            ]  # fmt: skip
            self.processes.append(subprocess.Popen(command, cwd=ROOT, env=env))
        deadline = time.monotonic() + timeout
        for index, process in enumerate(self.processes):
            log = self.log_dir / f"worker{index}.log"
            while not (log.exists() and "ready." in log.read_text()):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {index} did not start:\n{self.logs()}")
                time.sleep(0.1)

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.log_dir.glob("worker*.log")))

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
