"""``manage.py tulip_playground``: the agent playground with a Celery worker beside it.

Checks the Celery broker (``CELERY_BROKER_URL``). When it answers, starts one worker
process on the extraction queue (``TULIP_MEMORY["CELERY_QUEUE"]``) and serves the site in
``celery`` extraction mode; when it does not, says so and serves the site in
``background`` mode (in-process tasks). Ctrl-C stops the server and the worker; the
embedded PostgreSQL stops when this process exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from tulip_memory.conf import settings as tulip_settings

ROOT = Path(__file__).resolve().parents[4]


def broker_problem(url: str, timeout: float = 3.0) -> str | None:
    """Why the broker at ``url`` cannot be used, or None when it answers."""
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=timeout) as connection:
            connection.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


class Command(BaseCommand):
    help = "Serve the agent playground, with a Celery worker when the broker answers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="Do not start a worker: background extraction mode.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        broker = settings.CELERY_BROKER_URL
        problem = "--no-worker given" if options["no_worker"] else broker_problem(broker)
        worker = None
        if problem is None:
            mode = "celery"
            worker = self._start_worker()
            self.stdout.write(
                f"Celery broker {broker} answers: a worker (pid {worker.pid}) runs the "
                f"extractions from queue {tulip_settings.CELERY_QUEUE!r}."
            )
        elif options["no_worker"]:
            mode = "background"
            self.stdout.write(
                "--no-worker: extraction runs in background mode (in-process tasks of the server)."
            )
        else:
            mode = "background"
            self.stdout.write(
                self.style.WARNING(
                    f"No Celery broker at {broker} ({problem}): extraction falls back to "
                    "background mode (in-process tasks of the server)."
                )
            )
        os.environ["TULIP_PLAYGROUND_EXTRACT_MODE"] = mode
        settings.PLAYGROUND_EXTRACT_MODE = mode
        self._allow_host(options["addrport"])
        self.stdout.write(f"The playground: http://{options['addrport']}/ (Ctrl-C stops it)")
        try:
            call_command("runserver", options["addrport"], use_reloader=False)
        finally:
            if worker is not None:
                worker.terminate()
                try:
                    worker.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    worker.kill()

    def _allow_host(self, addrport: str) -> None:
        """Let the server answer on the address it binds (Django refuses other Host
        headers with 400): a named host is allowed; all interfaces (0.0.0.0, ::) allow any
        host, as this example site runs for a developer's own network."""
        host = addrport.rsplit(":", 1)[0].strip("[]") if ":" in addrport else addrport
        if host.isdigit() or not host or host in settings.ALLOWED_HOSTS:
            return  # a port alone: 127.0.0.1
        if "DJANGO_ALLOWED_HOSTS" in os.environ:
            return  # the developer's own list
        if host in ("0.0.0.0", "::"):
            settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "*"]
            self.stdout.write(
                f"Bound to every interface ({host}): any Host header is answered (an "
                "example site; set DJANGO_ALLOWED_HOSTS to narrow it)."
            )
        else:
            settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, host]

    @staticmethod
    def _start_worker() -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            # The worker uses this process's database instead of starting a server of its own.
            "DATABASE_URL": settings.APP_DATABASE_URL,
            "DATABASE_OWNER_URL": settings.OWNER_DATABASE_URL,
            "TULIP_PLAYGROUND_EXTRACT_MODE": "celery",
        }
        command = [
            sys.executable, "-m", "celery", "-A", "example_project", "worker",
            "-Q", tulip_settings.CELERY_QUEUE, "--pool=solo", "--loglevel=WARNING",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
        ]  # fmt: skip
        return subprocess.Popen(command, cwd=ROOT, env=env)
