"""The Celery side of the manager tests: TULIP_MEMORY shared by test process and workers,
and the worker processes themselves (``celery -A example_project worker``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def celery_tulip_memory() -> dict[str, Any]:
    """TULIP_MEMORY of the Celery tests, from the environment the session fixture set.

    ``TULIP_TEST_LLM_BASE_URL`` (the chat-server test double's URL) configures the chat
    model, so the workers run the LLM extractor; ``TULIP_TEST_STORE`` names another store,
    ``TULIP_TEST_STORE_OPTIONS`` (JSON) gives its options; ``TULIP_TEST_JOB_TIMEOUT`` is
    ``EXTRACTION_JOB_TIMEOUT_SECONDS`` (30 s).
    """
    llm_url = os.environ.get("TULIP_TEST_LLM_BASE_URL")
    return {
        "STORE": os.environ.get("TULIP_TEST_STORE", "tulip_memory.store.PgMemory"),
        "STORE_OPTIONS": json.loads(os.environ.get("TULIP_TEST_STORE_OPTIONS", "{}")),
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
        "EXTRACTION_RESEND_AFTER": 1.0,
        "EXTRACTION_JOB_TIMEOUT_SECONDS": float(os.environ.get("TULIP_TEST_JOB_TIMEOUT", "30")),
    }


def delete_queue_keys(queue: str) -> None:
    """Delete every Redis key of ``queue`` (and kombu's bindings of it): nothing left behind."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    leftovers = list(client.scan_iter(match=f"*{queue}*"))
    if leftovers:
        client.delete(*leftovers)
    client.close()


def drop_waiting_messages(queue: str) -> int:
    """Delete the messages of ``queue`` no worker has taken yet (its Redis lists, one per
    priority step; kombu's bindings stay, so later messages still reach the queue)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        lists = [
            key
            for key in client.scan_iter(match=f"{queue}*")
            if key.decode() == queue or key.decode().startswith(queue + "\x06\x16")
        ]
        return int(client.delete(*lists)) if lists else 0
    finally:
        client.close()


def _descendants(pid: int) -> list[int]:
    """The process ids of ``pid``'s children, grandchildren ... (Linux ``/proc``)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                children = [int(c) for c in (task / "children").read_text().split()]
                found.extend(children)
                todo.extend(children)
        except FileNotFoundError:
            continue
    return found


class Workers:
    """``count`` Celery worker processes (prefork, one child each) on the test queue.

    ``env`` is added to each worker's environment (its ``TULIP_TEST_CELERY_QUEUE`` is the
    queue it consumes). Each ``start()`` starts ``count`` more; the processes of every
    start are in ``processes``, their logs in ``log_dir`` (what a worker writes to its
    stderr before its log file is set up, in ``worker<n>.stderr``).
    """

    def __init__(self, count: int, log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.count = count
        self.log_dir = log_dir
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.manager.worker_settings",
            **(env or {}),
        }
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, timeout: float = 90.0) -> None:
        queue = self.env["TULIP_TEST_CELERY_QUEUE"]
        started = []
        for index in range(len(self.processes), len(self.processes) + self.count):
            log = self.log_dir / f"worker{index}.log"
            command = [
                sys.executable, "-m", "celery", "-A", "example_project", "worker",
                "--pool=prefork", "--concurrency=1", "-Q", queue, "-n", f"{queue}-w{index}@%h",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "--loglevel=INFO", f"--logfile={log}",
            ]  # fmt: skip
            with (self.log_dir / f"worker{index}.stderr").open("wb") as stderr:
                process = subprocess.Popen(command, cwd=ROOT, env=self.env, stderr=stderr)
            started.append((log, process))
        self.processes.extend(process for _, process in started)
        deadline = time.monotonic() + timeout
        for log, process in started:
            while not (log.exists() and "ready." in log.read_text()):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {log.name} did not start:\n{self.logs()}")
                time.sleep(0.1)

    def logs(self) -> str:
        files = [*self.log_dir.glob("worker*.log"), *self.log_dir.glob("worker*.stderr")]
        return "\n".join(p.read_text() for p in sorted(files))

    def names(self) -> list[str]:
        queue = self.env["TULIP_TEST_CELERY_QUEUE"]
        return [f"{queue}-w{index}@{socket.gethostname()}" for index in range(len(self.processes))]

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Wait until no worker runs, holds or has scheduled a task (a retry's countdown
        included: it would touch the tables after the test); fail after ``timeout``."""
        from celery import current_app

        inspect = current_app.control.inspect(destination=self.names(), timeout=1.0)
        deadline = time.monotonic() + timeout
        while True:
            replies = [inspect.active(), inspect.reserved(), inspect.scheduled()]
            busy = {
                name: tasks for reply in replies for name, tasks in (reply or {}).items() if tasks
            }
            if all(replies) and not busy:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"workers still busy after {timeout} s: {busy or replies}")
            time.sleep(0.2)

    def kill_whole(self, index: int) -> list[int]:
        """SIGKILL worker ``index``: its main process and every child at once, as when its
        host dies (nothing of it runs a shutdown handler); the pids killed."""
        process = self.processes[index]
        pids = [process.pid, *_descendants(process.pid)]
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        process.wait()
        return pids

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


class Beat:
    """A ``celery beat`` process running the extraction sweep every ``every`` seconds on
    the queue ``env["TULIP_TEST_CELERY_QUEUE"]`` (tests/manager/worker_settings.py)."""

    def __init__(self, every: float, log_dir: Path, env: dict[str, str]) -> None:
        self.log = log_dir / "beat.log"
        self.schedule = log_dir / "beat-schedule"
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.manager.worker_settings",
            **env,
            "TULIP_TEST_SWEEP_EVERY": str(every),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "example_project", "beat",
            f"--schedule={self.schedule}", "--loglevel=INFO", f"--logfile={self.log}",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, cwd=ROOT, env=self.env)
        deadline = time.monotonic() + timeout
        while not (self.log.exists() and "Sending due task" in self.log.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = self.log.read_text() if self.log.exists() else ""
                raise RuntimeError(f"celery beat did not start:\n{log}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
